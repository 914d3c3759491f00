"""Cases transcribed from kubernetes/kubernetes pkg/scheduler/framework/plugins tests."""
