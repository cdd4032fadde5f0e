"""Helpers shared by the tenancy services."""
from __future__ import annotations


def fields_of(obj, names) -> dict:
    return {name: getattr(obj, name) for name in names}
