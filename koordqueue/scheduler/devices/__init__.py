"""Volcano's shared devices (gpushare and vGPU), per node: what the deviceshare plugin
filters, scores and allocates on. A library, not a plugin (plugins/deviceshare.py uses it)."""
