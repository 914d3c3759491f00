"""numa-aware's topology-manager policies and cpu-manager hint provider (Volcano's
plugins/numaaware/policy and provider/cpumanager, v1.14.1)."""
