"""Queue admission through scheduling gates, Kubernetes side: gate manager and webhook."""
