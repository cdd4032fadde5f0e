"""Invoice line descriptions in words a customer reads, as SQL expressions for the set-based rating statements.

A usage line reads ``<resource> <short id> (<what was sold>), <pricing>``, e.g.
``Instance 9c1d2e3f (h100-mig-3g40), on demand``, ``Public IP address 5a6b7c8d, on demand``,
``Instance 9c1d2e3f (8 × H100-SXM5-80GB GPU), spot``, ``Volume 1f2e3d4c (fast storage), on demand``,
``Lease 00120064 (16 × H100-SXM5-80GB GPU), reserved, Premium SLA``. A per-GPU SKU (``gpu:model=...`` without a
GPU count, priced per GPU: a lease) names the GPUs the usage held (its `units`; a lease that grew reads
``8–16 × ...``), as a per-machine SKU names its count. A line bought at another SLA tier than the organization's
default names the tier (its name, ``Premium SLA``); at the default it says nothing of it. Late usage
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


def _units_words(low: str, high: str) -> str:
    """SQL text: a count of units (`8`, `1.29`; `8–16` when it changed), or NULL."""
    def num(x: str) -> str:
        return f"trim_scale(round({x}, 2))::text"
    return f"(CASE WHEN {low} = {high} THEN {num(low)} ELSE {num(low)} || '–' || {num(high)} END)"


def _sku_words(sku: str, units: str = "NULL") -> str:
    """What the SKU sells, in words (NULL when nothing worth saying, e.g. `public_ip`); `units`: SQL text of the
    units held, said for a per-GPU SKU."""
    model = _attr(sku, "model")
    return (f"CASE split_part({sku}, ':', 1)"
            f" WHEN 'flavor' THEN {_attr(sku, 'name')}"
            f" WHEN 'gpu' THEN coalesce({_attr(sku, 'gpu_count')} || ' × ', {units} || ' × ', '') || {model}"
            f" || ' GPU'"
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
              sku: str = "sku", pricing_model: str = "pricing_model", units: tuple[str, str] | None = None,
              sla_tier: str = "sla_tier", default_tier: str = "NULL") -> str:
    """SQL text expression: a usage line's description (module doc), after the SQL text `prefix`. `units`: SQL of
    the least and most units the line's usage held (said for a per-GPU SKU); `default_tier`: SQL of the
    organization's default tier (a line at another tier names it, from `billing_slatier`)."""
    pricing = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in PRICING_WORDS.items())
    held = _units_words(*units) if units else "NULL"
    tier = (f"CASE WHEN {sla_tier} <> '' AND {sla_tier} IS DISTINCT FROM {default_tier} THEN coalesce("
            f"(SELECT t.name FROM billing_slatier t WHERE t.code = {sla_tier}), {sla_tier}) || ' SLA' END")
    return (f"left({prefix} || {resource_sql(resource_type, resource_id)}"
            f" || coalesce(' (' || ({_sku_words(sku, held)}) || ')', '')"
            f" || coalesce(', ' || (CASE {pricing_model} {pricing} ELSE nullif({pricing_model}, '') END), '')"
            f" || coalesce(', ' || ({tier}), ''),"
            f" 300)")
