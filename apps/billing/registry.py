"""Plug-in points: usage sources and placement resolvers.

Other apps register from their `AppConfig.ready()`, in their `integrations.py`:

    from apps.billing.registry import UsageInterval, register_usage_source
    register_usage_source("compute.instance", instance_usage)   # fn(period_start, period_end) -> iterable

A **usage source** returns, for a UTC window `[period_start, period_end)`, every interval in which a resource was
billable (compute: instance active or stopped with its GPU held; reservations: lease active; networking: public IP
held), as `UsageInterval`s. An interval may extend beyond the window (the recorder clips it) and `end=None`
means still open. `key` must identify the source's interval (e.g. the instance's state-interval id) and be
stable across calls: the recorder keys each metering-hour piece by (source, key, hour), so recording a window
again adds nothing.

A **placement resolver** answers which resources sat on a host (or one of its GPUs) during a window:
`fn(host_id, gpu_id | None, start, end) -> iterable of Placement` (compute answers from the allocation ledger).
Billing uses it to turn provider-fault incidents into per-resource downtime. The lookup goes from the incident to
the resources because incidents are few and resources many (docs/adr/0601-billing-engine.md).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class UsageInterval:
    """One billable interval. `sku` from `sku_for()`; `sla_tier` "" = the organization's default tier;
    `commitment_*`: a reserved commitment's total price over its window (billed whether used or not);
    `run_key`: one start of the resource when a source reports a run in several intervals (default: `key`);
    minimum charges apply once per run (RW-052); `units`: how many of the SKU's unit are held (8 for eight GPUs on
    a per-GPU SKU, 1 for a per-flavor SKU): the time charge is multiplied by it."""

    key: str
    organization_id: object
    project_id: object
    resource_type: str
    resource_id: str
    sku: str
    pricing_model: str
    start: dt.datetime
    end: dt.datetime | None
    sla_tier: str = ""
    gpu_model: str = ""
    gpu_equivalents: Decimal = Decimal(0)
    commitment_amount: Decimal | None = None
    commitment_start: dt.datetime | None = None
    commitment_end: dt.datetime | None = None
    run_key: str = ""
    units: Decimal = Decimal(1)


@dataclass(frozen=True)
class Placement:
    """`resource_type`/`resource_id` held the host or GPU during `[start, end)` (`end` None: still holds).
    `units` None: the whole resource sits there (an instance), so a fault there takes all of it down; otherwise only
    `part` of it does (one allocation row of a lease), worth `units` of its usage's unit (GPU equivalents), and
    only that share of its usage goes uncharged and counts as SLA downtime. `project_id`: the project the resource
    belongs to (the owner an incident's impact names before any usage of the resource has been metered)."""

    resource_type: str
    resource_id: str
    start: dt.datetime
    end: dt.datetime | None
    part: str = ""
    units: Decimal | None = None
    project_id: str = ""


UsageSource = Callable[[dt.datetime, dt.datetime], Iterable[UsageInterval]]
PlacementResolver = Callable[[object, object, dt.datetime, dt.datetime], Iterable[Placement]]

_sources: dict[str, UsageSource] = {}
_resolvers: dict[str, PlacementResolver] = {}


def register_usage_source(name: str, fn: UsageSource) -> None:
    """Register (or replace) the usage source `name` (e.g. "compute.instance")."""
    _sources[name] = fn


def unregister_usage_source(name: str) -> None:
    _sources.pop(name, None)


def usage_sources() -> dict[str, UsageSource]:
    return dict(_sources)


def register_placement_resolver(name: str, fn: PlacementResolver) -> None:
    _resolvers[name] = fn


def unregister_placement_resolver(name: str) -> None:
    _resolvers.pop(name, None)


def placement_resolvers() -> dict[str, PlacementResolver]:
    return dict(_resolvers)
