"""koordqueue: quota-to-queue admission (Koord-Queue style) and Volcano-style batch scheduling.

Layers, bottom to top (each imports only from below): `domain` (pure model and algorithms),
`scheduler` (the session/action/plugin framework, still pure), `kube` and `simulation`
(the Kubernetes adapters and the in-process pipeline), `cli`.
"""

__version__ = "0.1.0"
