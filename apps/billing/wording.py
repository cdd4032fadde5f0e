"""Invoice line descriptions in words a customer reads, as SQL expressions for the set-based rating statements.

A usage line reads ``<resource> <short id> (<what was sold>), <pricing>``, e.g.
``Instance 9c1d2e3f (h100-mig-3g40), on demand``, ``Public IP address 5a6b7c8d, on demand``,
``Instance 9c1d2e3f (8 × H100-SXM5-80GB GPU), spot``, ``Volume 1f2e3d4c (fast storage), on demand``; late usage
is prefixed ``Late usage of 2026-02: ``, a reserved commitment ``Reserved commitment: ``, an SLA credit reads
``SLA credit for 2026-02: Instance 9c1d2e3f, uptime 99.5 % (credit 10 %)``. The short id is the last 8
characters of the resource's id (the random end of a UUIDv7: its first characters are the creation time, the same
for resources made together); the line's `resource_id` has the whole id, and the usage records behind the line
name the resource. The resource types are the usage sources' (`apps.billing.registry`), the SKU kinds those of
`apps.billing.skus`; an unknown type or kind reads as its own text, never as nothing.
"""
from __future__ import annotations

RESOURCE_WORDS = {
    "instance": "Instance",
    "networking.public_ip": "Public IP address",
    "storage.volume": "Volume",
    "lease": "Lease",
}

PRICING_WORDS = {"on_demand": "on demand", "spot": "spot", "reserved": "reserved"}


def _attr(sku: str, name: str) -> str:
    return f"substring({sku} from '[:,]{name}=([^,]+)')"


def _sku_words(sku: str) -> str:
    """What the SKU sells, in words (NULL when nothing worth saying, e.g. `public_ip`)."""
    model = _attr(sku, "model")
    return (f"CASE split_part({sku}, ':', 1)"
            f" WHEN 'flavor' THEN {_attr(sku, 'name')}"
            f" WHEN 'gpu' THEN coalesce({_attr(sku, 'gpu_count')} || ' × ', '') || {model} || ' GPU'"
            f" WHEN 'mig' THEN {model} || ' MIG ' || {_attr(sku, 'profile')}"
            f" WHEN 'vgpu' THEN 'vGPU ' || {_attr(sku, 'type')}"
            f" WHEN 'share' THEN {model} || ' GPU share'"
            f" WHEN 'lease' THEN {model} || ' GPUs'"
            f" WHEN 'volume' THEN {_attr(sku, 'type')} || ' storage'"
            f" WHEN 'public_ip' THEN NULL"
            f" ELSE nullif({sku}, '') END")


def resource_sql(resource_type: str = "resource_type", resource_id: str = "resource_id") -> str:
    """SQL text expression: the resource in words and its short id (``Instance 9c1d2e3f``)."""
    cases = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in RESOURCE_WORDS.items())
    return (f"(CASE {resource_type} {cases} ELSE replace({resource_type}, '_', ' ') END"
            f" || coalesce(' ' || nullif(right({resource_id}, 8), ''), ''))")


def usage_sql(*, prefix: str = "''", resource_type: str = "resource_type", resource_id: str = "resource_id",
              sku: str = "sku", pricing_model: str = "pricing_model") -> str:
    """SQL text expression: a usage line's description (module doc), after the SQL text `prefix`."""
    pricing = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in PRICING_WORDS.items())
    return (f"left({prefix} || {resource_sql(resource_type, resource_id)}"
            f" || coalesce(' (' || ({_sku_words(sku)}) || ')', '')"
            f" || coalesce(', ' || (CASE {pricing_model} {pricing} ELSE nullif({pricing_model}, '') END), ''),"
            f" 300)")
