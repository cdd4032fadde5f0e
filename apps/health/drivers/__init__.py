"""Fencing drivers: power a silent host off through its BMC and read the power state back (ADR 0218).
`redfish` (the `sushy` Redfish client) and `fake` (in memory, for the layers above the driver). The port is
`base.FenceDriver`; `apps.health.services.fencing` picks one by `HEALTH_FENCE_DRIVER`."""
