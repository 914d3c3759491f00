"""The Kubernetes adapter of the scheduler: cache (watch in), session loop, applier (writes out).

The pure framework in `koordqueue.scheduler` decides; this package is the only part of the
scheduler that talks to the API server (Volcano's `cache/` layer).
"""
