"""Compute drivers: `base` (the port), `libvirt` (production and contract tests), `fake` (unit tests)."""
