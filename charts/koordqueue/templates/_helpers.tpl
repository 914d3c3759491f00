{{/* Labels every object carries: deploy/'s app.kubernetes.io/name (deploy/webhook-cert.sh
finds the webhook configurations and the APIService by it) plus Helm's own. */}}
{{- define "koordqueue.labels" -}}
app.kubernetes.io/name: koordqueue
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The controller pods' selector: deploy/deployment.yaml's, so a Deployment applied with
kustomize can be taken over by a release (a selector cannot change). */}}
{{- define "koordqueue.selectorLabels" -}}
app.kubernetes.io/name: koordqueue
app.kubernetes.io/component: controller
{{- end -}}

{{/* cert-manager's cainjector copies the Certificate's CA into what carries this. */}}
{{- define "koordqueue.injectCA" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/koordqueue-webhook
{{- end -}}

{{- define "koordqueue.serviceAccountSubject" -}}
- kind: ServiceAccount
  name: koordqueue
  namespace: {{ .Release.Namespace }}
{{- end -}}
