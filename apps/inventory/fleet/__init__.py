"""Fleet description import/export (docs/fleet-format.md)."""
