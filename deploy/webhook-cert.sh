#!/bin/sh
# The webhook's serving certificate without cert-manager (what deploy/cert-manager.yaml has
# cert-manager do): a CA made here signs a certificate for the koordqueue-webhook Service
# (and koordqueue-visibility, the visibility API's); the
# pair goes into the Secret the Deployment mounts (koordqueue-webhook-tls), the CA into the
# caBundle of every koordqueue webhook configuration. Run it after `kubectl apply -k deploy/`,
# and again to renew (then `kubectl -n koord-queue rollout restart deploy/koordqueue-controller`).
#
#   deploy/webhook-cert.sh [SAN ...]    e.g. IP:10.0.0.5 to reach the webhook by another name
#
# Needs kubectl (current context, or $KUBECONFIG) and openssl >= 3.0. NAMESPACE, DAYS: env.
set -eu
ns=${NAMESPACE:-koord-queue}
days=${DAYS:-365}
service=koordqueue-webhook
visibility=koordqueue-visibility
sans="DNS:$service.$ns.svc,DNS:$service.$ns.svc.cluster.local"
sans="$sans,DNS:$visibility.$ns.svc,DNS:$visibility.$ns.svc.cluster.local"
for extra in "$@"; do sans="$sans,$extra"; done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days $days"
# shellcheck disable=SC2086  # $ec is several words
openssl req -x509 $ec -subj "/CN=koordqueue-webhook-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
# shellcheck disable=SC2086
openssl req -x509 $ec -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -subj "/CN=$service.$ns.svc" \
    -addext "subjectAltName=$sans" -addext "basicConstraints=critical,CA:FALSE" \
    -addext "keyUsage=critical,digitalSignature" -addext "extendedKeyUsage=serverAuth" \
    -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null

kubectl -n "$ns" create secret generic koordqueue-webhook-tls --type=kubernetes.io/tls \
    --from-file=tls.crt="$dir/tls.crt" --from-file=tls.key="$dir/tls.key" \
    --from-file=ca.crt="$dir/ca.crt" --dry-run=client -o yaml | kubectl apply -f -

ca=$(base64 < "$dir/ca.crt" | tr -d '\n')
for kind in mutatingwebhookconfigurations validatingwebhookconfigurations; do
    for config in $(kubectl get "$kind" -l app.kubernetes.io/name=koordqueue -o name); do
        count=$(kubectl get "$config" -o jsonpath='{range .webhooks[*]}x{end}' | wc -c)
        ops="" i=0
        while [ "$i" -lt "$count" ]; do
            ops="$ops{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$ca\"},"
            i=$((i + 1))
        done
        kubectl patch "$config" --type=json -p "[${ops%,}]"
    done
done
# the visibility API's APIService (deploy/visibility.yaml) trusts the same CA
for apiservice in $(kubectl get apiservices -l app.kubernetes.io/name=koordqueue -o name); do
    kubectl patch "$apiservice" --type=merge -p "{\"spec\":{\"caBundle\":\"$ca\"}}"
done
