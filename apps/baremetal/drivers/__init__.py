"""Bare-metal provisioning drivers: `ironic` (OpenStack Ironic through openstacksdk) and `fake` (in memory, for
the layers above the driver). The port is `base.BaremetalDriver`; docs/bare-metal.md describes the states."""
