"""Compute's billing plug-ins, registered by `integrations.register` (registry: `apps.billing.registry`).

**Usage source ``compute.instance``.** Source of truth: the allocation ledger (docs/adr/0400-allocation-ledger.md).
An instance (consumer type ``instance`` or ``cluster_member``) is billable while it holds its allocation - active,
or stopped with its GPU held - and only from its first launch (`Instance.launched_at`): a create that failed before
the domain ran is not charged. Each distinct ledger period ``[start, end)`` of the instance is one interval (a
resize ends the old rows and starts new ones at the same instant, so it splits the usage there), keyed
``instance:<id>:<period start ISO>`` so recording a window again adds nothing.

* on-demand: SKU ``flavor:name=<flavor>`` (the demo price book and docs/billing.md §3 price per flavor),
  ``units`` 1;
* spot (rows with ``spot``): SKU ``gpu:model=<model>`` per GPU, ``units`` = GPU equivalents (whole GPUs held;
  a MIG profile ``Ng.*`` counts N/7 of a GPU; a share ``share_milli``/1000);
* nested in a lease (any of its rows with a ``parent``): none of its rows is emitted, nor is it a placement
  for SLA downtime - the lease is billed and credited (``reservations.lease``).

``gpu_equivalents`` is filled the same way for utilization reports; ``sla_tier`` comes from the instance's own
``sla_tier`` attribute when it has one, else "" (the organization's default tier). Each period is rated at the
flavor the instance had during it: a resize records an `InstanceFlavorChange` at the instant its new ledger rows
start, so a period ending at or before a change had that change's ``from_flavor`` (two resizes in one billing
period give three intervals, at three flavors); the price is the one effective then (the rating engine's
effective-dated price books).

**Placement resolver ``compute.instance``.** ``(host_id, gpu_id | None, start, end)`` -> one `Placement` per
instance ledger period on that host (on that GPU when `gpu_id` is given) overlapping ``[start, end)``; billing
turns provider-fault incidents into per-instance downtime with it.
"""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from .states import Visibility

RESOURCE_TYPE = "instance"
CONSUMER_TYPES = ("instance", "cluster_member")
SOURCE = "compute.instance"
#: Compute slices of a full MIG-capable GPU (NVIDIA MIG User Guide: 7 GPU slices on A100/H100/H200).
MIG_COMPUTE_SLICES = 7


def _rows(start: dt.datetime, end: dt.datetime, **filters):
    from apps.scheduling.models import Allocation

    return (Allocation.objects.filter(consumer_type__in=CONSUMER_TYPES, period__overlap=DateTimeTZRange(start, end, "[)"),
                                      **filters)
            .only("consumer_id", "project_id", "period", "resource_class", "profile", "amount", "spot", "parent_id",
                  "gpu_id")
            .order_by("consumer_id", "period"))


def _nested(consumer_ids) -> set:
    """Consumers with any row nested in a lease (an instance with ``market: lease``): the lease is billed, so
    none of their rows is - not the GPU rows in the lease, nor their vCPU and memory rows from the host's pool,
    which stay top-level, whatever period each has."""
    from apps.scheduling.models import Allocation

    return set(Allocation.objects.filter(consumer_id__in=consumer_ids, parent__isnull=False)
               .values_list("consumer_id", flat=True).distinct())


def _gpu_equivalents(flavor, rows) -> Decimal:
    gpus = sum(1 for r in rows if r.resource_class == "gpu")
    if gpus:
        return Decimal(gpus)
    for r in rows:
        if r.resource_class == "mig" and r.profile[:1].isdigit():
            return mig_gpu_equivalents(r.profile)
        if r.resource_class == "share":
            return Decimal(r.amount) / 1000
    return Decimal(flavor.gpu_count or 0)


def instance_usage(period_start: dt.datetime, period_end: dt.datetime):
    """Usage source ``compute.instance``: `UsageInterval`s of instances holding ledger allocations in
    ``[period_start, period_end)`` (module doc)."""
    from apps.billing.registry import UsageInterval
    from apps.billing.skus import sku_for

    from .models import Instance, InstanceFlavorChange

    groups: dict = defaultdict(list)
    for row in _rows(period_start, period_end):
        groups[(row.consumer_id, row.period.lower, row.period.upper)].append(row)
    consumer_ids = {k[0] for k in groups}
    nested = _nested(consumer_ids)
    instances = Instance.objects.filter(pk__in=consumer_ids - nested).select_related("flavor", "project")
    by_id = {i.pk: i for i in instances}
    changes: dict = defaultdict(list)
    for change in (InstanceFlavorChange.objects.filter(instance_id__in=by_id, at__gt=period_start)
                   .select_related("from_flavor").order_by("at")):
        changes[change.instance_id].append(change)
    for (consumer_id, start, end), rows in groups.items():
        inst = by_id.get(consumer_id)
        if inst is None or inst.launched_at is None:
            continue
        start = max(start, inst.launched_at)
        if end is not None and end <= start:
            continue
        flavor = _flavor_during(inst, end, changes.get(inst.pk, ()))
        gpus = _gpu_equivalents(flavor, rows)
        spot = any(r.spot for r in rows)
        if spot and flavor.gpu_model:
            sku, model, units = sku_for("gpu", model=flavor.gpu_model), "spot", gpus
        else:
            sku, model, units = sku_for("flavor", name=flavor.name), "on_demand", Decimal(1)
        yield UsageInterval(
            key=f"instance:{inst.pk}:{rows[0].period.lower.isoformat()}", organization_id=inst.project.organization_id,
            project_id=inst.project_id, resource_type=RESOURCE_TYPE, resource_id=str(inst.pk), sku=sku,
            pricing_model=model, start=start, end=end, sla_tier=getattr(inst, "sla_tier", "") or "",
            gpu_model=flavor.gpu_model, gpu_equivalents=gpus, units=units)


def _flavor_during(inst, end: dt.datetime | None, changes):
    """The flavor of `inst` in a ledger period ending at `end` (None: still open): the `from_flavor` of the first
    resize at or after `end`, else the current flavor. `changes` are the instance's, ordered by `at`."""
    if end is not None:
        for change in changes:
            if change.at >= end:
                return change.from_flavor
    return inst.flavor


def instance_placements(host_id, gpu_id, start: dt.datetime, end: dt.datetime):
    """Placement resolver ``compute.instance`` (module doc)."""
    from apps.billing.registry import Placement

    filters = {"host_id": host_id}
    if gpu_id is not None:
        filters["gpu_id"] = gpu_id
    seen = set()
    rows = list(_rows(start, end, **filters))
    nested = _nested({r.consumer_id for r in rows})
    for row in rows:
        key = (row.consumer_id, row.period.lower, row.period.upper)
        if row.consumer_id not in nested and key not in seen:
            seen.add(key)
            yield Placement(RESOURCE_TYPE, str(row.consumer_id), row.period.lower, row.period.upper,
                            project_id=str(row.project_id))


def mig_gpu_equivalents(profile: str) -> Decimal:
    """Whole-GPU equivalents of one MIG GPU instance of `profile` (a name ``Ng.<memory>``, e.g. ``3g.40gb``):
    N compute slices of the GPU's 7, so N/7 (exact Decimal division). The one rule for instances (spot SKU,
    utilization) and for MIG leases (`apps.reservations.selectors`); a name not starting with a digit is 0."""
    if not profile[:1].isdigit():
        return Decimal(0)
    return Decimal(int(profile.split("g", 1)[0])) / MIG_COMPUTE_SLICES


def flavor_gpu_equivalents(flavor) -> Decimal:
    """Whole-GPU equivalents of one instance of `flavor`: its GPU count; a MIG profile ``Ng.*`` N/7
    (`mig_gpu_equivalents`); a share ``share_milli``/1000; a vGPU 1 (as the spot SKU counts it)."""
    if flavor.gpu_form == "mig" and flavor.mig_profile[:1].isdigit():
        return mig_gpu_equivalents(flavor.mig_profile)
    if flavor.gpu_form == "share":
        return Decimal(flavor.share_milli) / 1000
    if flavor.gpu_form == "vgpu":
        return Decimal(1)
    return Decimal(flavor.gpu_count or 0)


def flavor_sku(flavor, *, spot: bool = False) -> tuple[str, str, Decimal]:
    """(SKU, pricing model, units) that usage of one instance of `flavor` is rated at (`instance_usage`):
    on-demand ``flavor:name=<flavor>`` × 1; spot ``gpu:model=<model>`` × GPU equivalents."""
    from apps.billing.skus import sku_for

    if spot and flavor.gpu_model:
        return sku_for("gpu", model=flavor.gpu_model), "spot", flavor_gpu_equivalents(flavor)
    return sku_for("flavor", name=flavor.name), "on_demand", Decimal(1)


def flavor_price(flavor, organization, *, count: int = 1, spot: bool = False, sla_tier: str = "") -> dict:
    """The hourly price of `count` instances of `flavor` for `organization` (its currency, `sla_tier` or else its
    default SLA tier, the effective price book): `apps.billing.selectors.price_quote`'s shape, ``estimate_total`` null (an
    instance has no known end)."""
    from apps.billing.selectors import price_quote

    sku, model, units = flavor_sku(flavor, spot=spot)
    return price_quote(organization=organization, sku=sku, pricing_model=model, units=units * count,
                       sla_tier=sla_tier)


def flavor_prices(flavors, organizations) -> dict:
    """``{flavor id: [{"organization", "currency", "sla_tier", "on_demand_per_hour", "spot_per_hour"}]}``: for
    each of `organizations` a flavor is offered to (public, or listed in its ``organizations``), the hourly
    on-demand price of one instance and the spot price of its GPUs (null when no price book prices them) at the
    organization's currency and default SLA tier. Two queries for a page (the prices, the private offers)."""
    from apps.billing.selectors import decimal_text, price_per_hour, prices_effective

    flavors, organizations = list(flavors), list(organizations)
    if not flavors or not organizations:
        return {f.pk: [] for f in flavors}
    skus = {f.pk: (flavor_sku(f), flavor_sku(f, spot=True) if f.gpu_model else None) for f in flavors}
    prices = prices_effective(skus={k[0] for pair in skus.values() for k in pair if k},
                              currencies={o.currency for o in organizations})
    private = [f.pk for f in flavors if f.visibility != Visibility.PUBLIC]
    offered: dict = defaultdict(set)
    if private:
        through = flavors[0].organizations.through
        for fid, oid in through.objects.filter(flavor_id__in=private).values_list("flavor_id", "organization_id"):
            offered[fid].add(oid)
    out = {}
    for f in flavors:
        (sku, model, units), spot = skus[f.pk]
        rows = []
        for org in organizations:
            if f.visibility != Visibility.PUBLIC and org.pk not in offered[f.pk]:
                continue
            on_demand = price_per_hour(prices.get((org.currency, sku, org.default_sla_tier, model)), units)
            spot_price = (price_per_hour(prices.get((org.currency, spot[0], org.default_sla_tier, spot[1])),
                                         spot[2]) if spot else None)
            rows.append({"organization": str(org.pk), "currency": org.currency, "sla_tier": org.default_sla_tier,
                         "on_demand_per_hour": decimal_text(on_demand), "spot_per_hour": decimal_text(spot_price)})
        out[f.pk] = rows
    return out
