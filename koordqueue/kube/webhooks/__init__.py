"""Admission webhooks, all served by one TLS server on `--webhook-port` (server.py).

One small module per kind, defaulting and validation side by side (Kueue's pkg/webhooks,
koordinator's pkg/webhook/elasticquota): ElasticQuota validation (elasticquota.py), workload
defaulting, which holds a labelled workload at creation (workloads.py), and the pod gates
(koordqueue/kube/gates/webhook.py, served here too). The rules themselves are pure and live in
the domain (domain/quota_validation.py, domain/integrations/workload_gate.py, pod_gate.py);
these modules turn AdmissionReviews into them and back.
"""
