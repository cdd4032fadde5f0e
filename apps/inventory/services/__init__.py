"""Inventory writes. Every function is keyword-only with `actor` first and runs in one transaction."""
