"""Tenant-scoped reads: leases, instance capacity terms and queued requests, webhook endpoints; the capacity
calendar; the lease usage source for billing."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db import connection
from django.db.models import Q, QuerySet

from apps.tenancy.selectors import is_staff, organization_ids_visible_to, project_list_visible_to

from .models import InstanceTerms, Lease, OnDemandReserve, QueuedRequest, WebhookEndpoint
from .states import LeaseStatus


def lease_list_visible_to(user) -> QuerySet[Lease]:
    return Lease.objects.filter(project__in=project_list_visible_to(user)).select_related("project")


def queued_request_list_visible_to(user) -> QuerySet[QueuedRequest]:
    return QueuedRequest.objects.filter(project__in=project_list_visible_to(user)).select_related("instance")


def instance_terms_list_visible_to(user) -> QuerySet[InstanceTerms]:
    return InstanceTerms.objects.filter(project__in=project_list_visible_to(user)).select_related("instance")


def webhook_endpoint_list_visible_to(user) -> QuerySet[WebhookEndpoint]:
    if is_staff(user):
        return WebhookEndpoint.objects.all()
    return WebhookEndpoint.objects.filter(organization_id__in=organization_ids_visible_to(user))


# ---- capacity calendar --------------------------------------------------------------------------------------
CALENDAR_SQL = """
WITH b AS (
  SELECT t, t + %(step)s AS u FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - %(step)s,
                                                   %(step)s) AS t
), g AS (
  SELECT g.id, g.host_id, g.model, z.name AS zone FROM inventory_gpu g
  JOIN inventory_host h ON h.id = g.host_id JOIN inventory_zone z ON z.id = h.zone_id
  WHERE h.state = 'available' AND g.health = 'ok' AND g.mode = 'exclusive'
    AND (%(model)s = '' OR g.model = %(model)s) AND (%(zone)s = '' OR z.name = %(zone)s)
), x AS (
  SELECT g.model, g.zone, g.host_id, b.t,
    EXISTS (SELECT 1 FROM scheduling_allocation a WHERE a.gpu_id = g.id AND a.slices IS NOT NULL
            AND a.parent_id IS NULL AND NOT a.spot AND a.period && tstzrange(b.t, b.u, '[)')) AS held,
    EXISTS (SELECT 1 FROM scheduling_allocation a WHERE a.gpu_id = g.id AND a.consumer_type = 'lease'
            AND a.period && tstzrange(b.t, b.u, '[)')) AS leased,
    EXISTS (SELECT 1 FROM scheduling_allocation a WHERE a.gpu_id = g.id AND a.spot
            AND a.period && tstzrange(b.t, b.u, '[)')) AS spot
  FROM g CROSS JOIN b
)
SELECT model, zone, t, count(*) AS total, count(*) FILTER (WHERE held) AS held,
  count(*) FILTER (WHERE leased) AS leased, count(*) FILTER (WHERE spot) AS spot,
  count(DISTINCT host_id) AS hosts, count(DISTINCT host_id) FILTER (WHERE held) AS hosts_busy
FROM x GROUP BY model, zone, t ORDER BY model, zone, t
"""
MAX_BUCKETS = 24 * 31


def capacity_calendar(*, user, start: dt.datetime, end: dt.datetime, step: dt.timedelta, gpu_model: str = "",
                      zone: str = "") -> list[dict]:
    """Free exclusive-mode GPUs (and whole free hosts) per GPU model, zone and time bucket ``[t, t + step)``.

    A GPU counts as free in a bucket when nothing that blocks a lease (another lease, running on-demand work)
    holds it at any instant of the bucket; spot work does not count (it is preempted). `free` subtracts the
    operator's on-demand reserve, so tenants see what they could reserve; staff additionally get the totals
    and the breakdown (leased, on-demand, spot, reserve). Hosts that are not `available` are left out."""
    reserves = {(r.gpu_model, r.zone): r.gpus for r in OnDemandReserve.objects.all()}
    with connection.cursor() as cur:
        cur.execute(CALENDAR_SQL, {"start": start, "end": end, "step": step, "model": gpu_model, "zone": zone})
        rows = cur.fetchall()
    staff = is_staff(user)
    out = []
    for model, zone_name, t, total, held, leased, spot, hosts, hosts_busy in rows:
        reserve = reserves.get((model, zone_name), 0) + reserves.get((model, ""), 0)
        item = {"gpu_model": model, "zone": zone_name, "start": t, "end": t + step,
                "free_gpus": max(total - held - reserve, 0), "free_hosts": hosts - hosts_busy}
        if staff:
            item.update(total_gpus=total, leased_gpus=leased, on_demand_gpus=held - leased, spot_gpus=spot,
                        reserve_gpus=reserve, hosts=hosts)
        out.append(item)
    return out


# ---- billing usage source -----------------------------------------------------------------------------------
def lease_usage(period_start: dt.datetime, period_end: dt.datetime):
    """Billing usage source ``reservations.lease``: one reserved-pricing interval per lease that was active in
    ``[period_start, period_end)`` (from activation to its end or cancellation). The SKU ``gpu:model=<model>`` is
    priced per GPU, so ``units`` is the lease's size in GPUs (`_lease_gpus`: 8 for one HGX host, 3/7 for a
    ``3g`` MIG instance). A lease has no committed total price (yet), so no ``commitment_*`` fields are sent and
    billing rates the window at the per-GPU reserved hourly price."""
    from apps.billing.registry import UsageInterval
    from apps.billing.skus import sku_for

    qs = Lease.objects.filter(Q(status__in=(LeaseStatus.ACTIVE, LeaseStatus.ENDING, LeaseStatus.ENDED))
                              | Q(status=LeaseStatus.CANCELLED, activated_at__isnull=False),
                              start__lt=period_end, end__gt=period_start).select_related("project")
    for lease in qs:
        start = lease.activated_at or lease.start
        end = lease.ended_at if lease.status in (LeaseStatus.ENDED, LeaseStatus.CANCELLED) else None
        gpus = _lease_gpus(lease)
        yield UsageInterval(key=f"lease:{lease.pk}", organization_id=lease.project.organization_id,
                            project_id=lease.project_id, resource_type="lease", resource_id=str(lease.pk),
                            sku=sku_for("gpu", model=lease.gpu_model), pricing_model="reserved", start=start,
                            end=end or lease.end, gpu_model=lease.gpu_model, gpu_equivalents=gpus, units=gpus)


def lease_placements(host_id, gpu_id, start: dt.datetime, end: dt.datetime):
    """Billing placement resolver ``reservations.lease``: one `Placement` ``("lease", <lease id>, start, end)``
    per ledger period of a lease's allocations on host `host_id` (on GPU `gpu_id` when given) that overlaps
    ``[start, end)``. Billing turns provider-fault incidents of that host or GPU into lease downtime with it, so a
    lease follows the instances' rule (docs/billing.md, "Downtime and SLA credits"): the downtime is not charged
    and counts against the lease's SLA tier. Instances nested in a lease are not placements of the lease (their
    rows belong to the instance consumer)."""
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

    from apps.billing.registry import Placement
    from apps.scheduling.models import Allocation

    rows = Allocation.objects.filter(consumer_type="lease", host_id=host_id,
                                     period__overlap=DateTimeTZRange(start, end, "[)"))
    if gpu_id is not None:
        rows = rows.filter(gpu_id=gpu_id)
    seen = set()
    for consumer_id, period in rows.order_by("consumer_id", "period").values_list("consumer_id", "period"):
        if (consumer_id, period.lower, period.upper) not in seen:
            seen.add((consumer_id, period.lower, period.upper))
            yield Placement("lease", str(consumer_id), period.lower, period.upper)


def _lease_gpus(lease: Lease) -> Decimal:
    from apps.inventory.selectors import gpus_per_host_max

    if lease.kind == "hosts":
        return Decimal(lease.count * gpus_per_host_max(lease.gpu_model))
    if lease.kind == "gpus":
        return Decimal(lease.count)
    if lease.kind == "shares":
        return Decimal(lease.count * lease.share_milli) / 1000
    return Decimal(lease.count) / 7


def lease_price(lease: Lease) -> dict:
    """What `lease` would cost its organization: the reserved price of ``gpu:model=<model>`` (the SKU
    `lease_usage` bills) × the lease's GPUs (`_lease_gpus`) per hour, and over its window ``[start, end)``
    (``estimate_total``); the shape of `apps.billing.selectors.price_quote`."""
    from apps.billing.selectors import price_quote
    from apps.billing.skus import sku_for

    hours = Decimal((lease.end - lease.start).total_seconds()) / 3600
    return price_quote(organization=lease.project.organization, sku=sku_for("gpu", model=lease.gpu_model),
                       pricing_model="reserved", units=_lease_gpus(lease), hours=hours, at=lease.start)
