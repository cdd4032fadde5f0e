"""Tenant-scoped reads: leases, instance capacity terms and queued requests, webhook endpoints; the capacity
calendar; the lease usage source for billing."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import lru_cache

from django.db import connection
from django.db.models import Count, Q, QuerySet

from apps.core.clock import now as clock_now
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
#: One pass over the allocations in the window (joined to the buckets they overlap), then every GPU × bucket
#: looked up in it: a per-GPU-and-bucket EXISTS subquery cost about 10x more at 16,000 GPUs. The buckets come as
#: an array (`_buckets`): PostgreSQL 15 estimates `generate_series` over timestamps at 1,000 rows, and the
#: resulting 17-million-row estimate made it JIT-compile the query (about 0.3 s) to run it in 0.05 s.
CALENDAR_SQL = """
WITH b AS (
  SELECT t, t + %(step)s AS u FROM unnest(%(buckets)s::timestamptz[]) AS t
), g AS (
  SELECT g.id, g.host_id, g.model, z.name AS zone FROM inventory_gpu g
  JOIN inventory_host h ON h.id = g.host_id JOIN inventory_zone z ON z.id = h.zone_id
  WHERE h.state = 'available' AND NOT h.spare AND g.health = 'ok' AND g.mode = 'exclusive'
    AND (%(model)s = '' OR g.model = %(model)s) AND (%(zone)s = '' OR z.name = %(zone)s)
), a AS (
  SELECT a.gpu_id, b.t,
    bool_or(a.slices IS NOT NULL AND a.parent_id IS NULL AND NOT a.spot) AS held,
    bool_or(a.consumer_type = 'lease') AS leased,
    bool_or(a.spot) AS spot
  FROM scheduling_allocation a JOIN b ON a.period && tstzrange(b.t, b.u, '[)')
  WHERE a.gpu_id IS NOT NULL AND a.period && tstzrange(%(start)s::timestamptz, %(end)s::timestamptz, '[)')
  GROUP BY a.gpu_id, b.t
), x AS (
  SELECT g.model, g.zone, g.host_id, b.t, coalesce(a.held, false) AS held, coalesce(a.leased, false) AS leased,
    coalesce(a.spot, false) AS spot
  FROM g CROSS JOIN b LEFT JOIN a ON a.gpu_id = g.id AND a.t = b.t
)
SELECT model, zone, t, count(*) AS total, count(*) FILTER (WHERE held) AS held,
  count(*) FILTER (WHERE leased) AS leased, count(*) FILTER (WHERE spot) AS spot,
  count(DISTINCT host_id) AS hosts, count(DISTINCT host_id) FILTER (WHERE held) AS hosts_busy
FROM x GROUP BY model, zone, t ORDER BY model, zone, t
"""
MAX_BUCKETS = 24 * 31


FRACTIONAL_SQL = """
SELECT g.id, g.model, z.name AS zone, g.mode FROM inventory_gpu g
JOIN inventory_host h ON h.id = g.host_id JOIN inventory_zone z ON z.id = h.zone_id
WHERE h.state = 'available' AND NOT h.spare AND g.health = 'ok' AND g.mode IN ('mig', 'vgpu', 'shared')
  AND (%(model)s = '' OR g.model = %(model)s) AND (%(zone)s = '' OR z.name = %(zone)s)
"""
FRACTIONAL_ROWS_SQL = """
SELECT a.gpu_id, a.resource_class, a.profile, lower(a.slices), a.amount, lower(a.period), upper(a.period)
FROM scheduling_allocation a
WHERE a.gpu_id = ANY(%(gpus)s) AND a.parent_id IS NULL AND NOT a.spot AND a.period && tstzrange(%(start)s, %(end)s, '[)')
"""
#: GPU mode -> the form its capacity is sold in (a ``mig`` lease, a vGPU flavor, a ``shares`` lease).
FRACTIONAL_FORMS = {"mig": "mig", "vgpu": "vgpu", "shared": "share"}


@lru_cache(maxsize=4096)
def _fractional_free(model: str, form: str, occupancy: tuple) -> tuple[tuple[str, int], ...]:
    """((profile, free units), ...) of one `model` GPU in `form` with `occupancy` ((resource class, profile,
    first slice, amount), ...) held: MIG GPU instances of each profile that could still be placed, each profile
    alone (the MIG planner, `apps.inventory.mig.mig_max_placeable`, NVIDIA's placement rules); vGPUs of each type
    (one type per GPU, at most the catalog's ``max``, as `apps.scheduling.placement.devices.vgpu_options`
    decides); milli-GPU of shares (1000 minus the shares held, `devices.share_free_milli`). A whole-GPU row
    leaves nothing."""
    from apps.inventory.catalog import gpu_model_get
    from apps.inventory.mig import mig_max_placeable

    spec = gpu_model_get(model)
    whole = any(rc == "gpu" for rc, *_ in occupancy)
    if form == "mig":
        if spec is None or spec.mig is None:
            return ()
        if whole or any(rc not in ("mig",) for rc, *_ in occupancy):
            return tuple((p.name, 0) for p in spec.mig.profiles)
        layout = sorted({(profile, lo) for rc, profile, lo, _ in occupancy})
        free = mig_max_placeable(spec.mig, layout)
        return tuple((p.name, free.get(p.name, 0)) for p in spec.mig.profiles)
    if form == "vgpu":
        if spec is None:
            return ()
        held = [(profile, amount) for rc, profile, _, amount in occupancy if rc == "vgpu"]
        blocked = whole or any(rc == "mig" for rc, *_ in occupancy)
        types = {profile for profile, _ in held}
        return tuple((t.name, 0 if blocked or types - {t.name} else
                      max(t.max - sum(a for profile, a in held if profile == t.name), 0)) for t in spec.vgpu_types)
    blocked = whole or any(rc == "mig" for rc, *_ in occupancy)
    return (("", 0 if blocked else max(1000 - sum(a for rc, _, _, a in occupancy if rc == "share"), 0)),)


def _buckets(start: dt.datetime, end: dt.datetime, step: dt.timedelta) -> list[dt.datetime]:
    out, t = [], start
    while t + step <= end:
        out.append(t)
        t += step
    return out


def _fractional_calendar(*, start, end, step, gpu_model: str, zone: str) -> dict:
    """{(model, zone, bucket start): [{"form", "profile", "gpus", "free", "total"}, ...]} for healthy GPUs in
    MIG, vGPU or shared mode on available hosts; a row held by a lease or running on-demand work at any instant
    of the bucket counts as held all of it (spot rows do not count, as for whole GPUs)."""
    with connection.cursor() as cur:
        cur.execute(FRACTIONAL_SQL, {"model": gpu_model, "zone": zone})
        gpus = cur.fetchall()
        if not gpus:
            return {}
        cur.execute(FRACTIONAL_ROWS_SQL, {"gpus": [g[0] for g in gpus], "start": start, "end": end})
        rows = cur.fetchall()
    by_gpu: dict = {}
    for gpu_id, rc, profile, lo, amount, lower, upper in rows:
        by_gpu.setdefault(gpu_id, []).append((rc, profile or "", lo, amount or 0, lower, upper))
    buckets = _buckets(start, end, step)
    acc: dict = {}   # (model, zone, t, form, profile) -> [gpus, free, total]
    idle: dict = {}  # (model, zone, form) -> GPUs with no row in the range (the same in every bucket)

    def add(model, zone_name, t, form, free, total, n_gpus=1):
        for (profile, n), (_, cap) in zip(free, total, strict=True):
            cell = acc.setdefault((model, zone_name, t, form, profile), [0, 0, 0])
            cell[0] += n_gpus
            cell[1] += n * n_gpus
            cell[2] += cap * n_gpus

    for gpu_id, model, zone_name, mode in gpus:
        form = FRACTIONAL_FORMS[mode]
        mine = by_gpu.get(gpu_id)
        if not mine:
            idle[(model, zone_name, form)] = idle.get((model, zone_name, form), 0) + 1
            continue
        total = _fractional_free(model, form, ())
        for t in buckets:
            u = t + step
            occupancy = tuple(sorted((rc, profile, lo, amount) for rc, profile, lo, amount, lower, upper in mine
                                     if lower < u and (upper is None or upper > t)))
            add(model, zone_name, t, form, _fractional_free(model, form, occupancy) if occupancy else total, total)
    for (model, zone_name, form), n_gpus in idle.items():
        total = _fractional_free(model, form, ())
        for t in buckets:
            add(model, zone_name, t, form, total, total, n_gpus)
    out: dict = {}
    for (model, zone_name, t, form, profile), (n_gpus, free, total) in acc.items():
        out.setdefault((model, zone_name, t), []).append(
            {"form": form, "profile": profile, "gpus": n_gpus, "free": free, "total": total})
    for entries in out.values():
        entries.sort(key=lambda e: e["form"])  # stable: catalog order of profiles within a form
    return out


def capacity_calendar(*, user, start: dt.datetime, end: dt.datetime, step: dt.timedelta, gpu_model: str = "",
                      zone: str = "") -> list[dict]:
    """Free capacity per GPU model, zone and time bucket ``[t, t + step)``: exclusive-mode GPUs and whole free
    hosts, and (``profiles``) what GPUs in MIG, vGPU and shared mode can still hold.

    A GPU counts as free in a bucket when nothing that blocks a lease (another lease, running on-demand work)
    holds it at any instant of the bucket; spot work does not count (it is preempted). `free` subtracts the
    operator's on-demand reserve, so tenants see what they could reserve; staff additionally get the totals
    and the breakdown (leased, on-demand, spot, reserve). Hosts that are not `available` are left out.

    ``profiles``: one entry per MIG profile (``form: mig``), vGPU type (``vgpu``) or share (``share``, profile
    ``""``) of the model: ``gpus`` (healthy GPUs in that mode), ``free`` (GPU instances of that profile that could
    still be placed, each profile counted alone; vGPUs of the type; milli-GPU of shares - held at any instant of
    the bucket counts as held), staff also ``total`` (the same with nothing held). The on-demand reserve (whole
    GPUs) is not taken from them. A model with only MIG, vGPU or shared GPUs has ``free_gpus`` 0 and its
    ``profiles``."""
    reserves = {(r.gpu_model, r.zone): r.gpus for r in OnDemandReserve.objects.all()}
    with connection.cursor() as cur:
        cur.execute(CALENDAR_SQL, {"start": start, "end": end, "step": step, "buckets": _buckets(start, end, step),
                                   "model": gpu_model, "zone": zone})
        rows = cur.fetchall()
    fractional = _fractional_calendar(start=start, end=end, step=step, gpu_model=gpu_model, zone=zone)
    staff = is_staff(user)
    whole = {(model, zone_name, t): rest for model, zone_name, t, *rest in rows}
    out = []
    for key in sorted(whole.keys() | fractional.keys()):
        model, zone_name, t = key
        total, held, leased, spot, hosts, hosts_busy = whole.get(key, (0, 0, 0, 0, 0, 0))
        reserve = reserves.get((model, zone_name), 0) + reserves.get((model, ""), 0)
        profiles = fractional.get(key, [])
        item = {"gpu_model": model, "zone": zone_name, "start": t, "end": t + step,
                "free_gpus": max(total - held - reserve, 0), "free_hosts": hosts - hosts_busy,
                "profiles": profiles if staff else [{k: v for k, v in p.items() if k != "total"} for p in profiles]}
        if staff:
            item.update(total_gpus=total, leased_gpus=leased, on_demand_gpus=held - leased, spot_gpus=spot,
                        reserve_gpus=reserve, hosts=hosts)
        out.append(item)
    return out


# ---- billing usage source -----------------------------------------------------------------------------------
def lease_usage(period_start: dt.datetime, period_end: dt.datetime):
    """Billing usage source ``reservations.lease``: reserved-pricing intervals of every lease that was active in
    ``[period_start, period_end)``, one per size the lease had (`_lease_sizes`: from activation to its end or
    cancellation, split wherever its allocations in the ledger grow, e.g. a lease grown from 2 to 3 hosts at 10:00
    gives 2 hosts until 10:00 and 3 from then). The SKU ``gpu:model=<model>`` is priced per GPU, so ``units`` is
    the size in GPUs (`_lease_gpus`: 8 for one HGX host, 9/7 for three ``3g.40gb`` MIG instances). Keys: the
    first size ``lease:<id>`` (as before sizes were split, so windows recorded earlier are not recorded twice),
    each later one ``lease:<id>:<its start ISO>``; one run (``run_key`` ``lease:<id>``). A lease has no committed
    total price (yet), so no ``commitment_*`` fields are sent and billing rates the window at the per-GPU reserved
    hourly price."""
    from apps.billing.registry import UsageInterval
    from apps.billing.skus import sku_for

    qs = list(Lease.objects.filter(Q(status__in=(LeaseStatus.ACTIVE, LeaseStatus.ENDING, LeaseStatus.ENDED))
                                   | Q(status=LeaseStatus.CANCELLED, activated_at__isnull=False),
                                   start__lt=period_end, end__gt=period_start).select_related("project"))
    rows = _lease_rows([lease.pk for lease in qs])
    for lease in qs:
        first = True
        for start, end, count in _lease_sizes(lease, rows.get(lease.pk, [])):
            key = f"lease:{lease.pk}" if first else f"lease:{lease.pk}:{start.isoformat()}"
            first = False
            if start >= period_end or end <= period_start:
                continue
            gpus = _lease_gpus(lease, count)
            yield UsageInterval(key=key, run_key=f"lease:{lease.pk}", organization_id=lease.project.organization_id,
                                project_id=lease.project_id, resource_type="lease", resource_id=str(lease.pk),
                                sku=sku_for("gpu", model=lease.gpu_model), pricing_model="reserved", start=start,
                                end=end, sla_tier=lease.sla_tier, gpu_model=lease.gpu_model,
                                gpu_equivalents=gpus, units=gpus)


def _lease_rows(lease_ids) -> dict:
    """{lease id: [(period start, period end or None, host id, resource class), ...]}: the capacity rows of the
    leases in the allocation ledger (whole GPUs, MIG GPU instances, shares)."""
    from apps.scheduling.models import Allocation

    out: dict = {}
    for consumer_id, period, host_id, rc in (Allocation.objects.filter(
            consumer_id__in=lease_ids, consumer_type="lease", resource_class__in=("gpu", "mig", "share"))
            .values_list("consumer_id", "period", "host_id", "resource_class")):
        out.setdefault(consumer_id, []).append((period.lower, period.upper, host_id, rc))
    return out


def _lease_sizes(lease: Lease, rows: list) -> list[tuple[dt.datetime, dt.datetime, int]]:
    """[(start, end, count), ...]: the lease's size (in its own unit: hosts, GPUs, MIG instances, shares) over
    its billed time, activation (or start) to its end (`ended_at` once ended or cancelled), split where the size
    its ledger rows hold changes (a grow adds rows from that instant; an earlier end ends all of them). Pieces
    of equal size are merged; a piece with nothing held is left out. Without rows (none recorded) the whole
    window at `count`."""
    start = lease.activated_at or lease.start
    end = lease.ended_at if lease.status in (LeaseStatus.ENDED, LeaseStatus.CANCELLED) else lease.end
    if end <= start:
        return []
    if not rows:
        return [(start, end, lease.count)]
    cuts = sorted({start, end} | {t for lo, up, _, _ in rows for t in (lo, up) if t is not None and start < t < end})
    out: list = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        held = [(host, rc) for lo, up, host, rc in rows if lo <= a and (up is None or up > a)]
        n = len({host for host, _ in held}) if lease.kind == "hosts" else len(held)
        if not n:
            continue
        if out and out[-1][2] == n and out[-1][1] == a:
            out[-1] = (out[-1][0], b, n)
        else:
            out.append((a, b, n))
    return out


def lease_placements(host_id, gpu_id, start: dt.datetime, end: dt.datetime):
    """Billing placement resolver ``reservations.lease``: one `Placement` ``("lease", <lease id>, start, end)``
    per allocation row of a lease on host `host_id` (on GPU `gpu_id` when given) whose period overlaps
    ``[start, end)``, with ``part`` = the row's id and ``units`` = the GPU equivalents the row holds (1 for a whole
    GPU, N/7 for a MIG ``Ng`` instance, milli-GPU / 1000 for a share). Billing turns provider-fault incidents of
    that host or GPU into lease downtime with it, so a lease follows the instances' rule for the part that was
    down (docs/billing.md, "Downtime and SLA credits"): one faulty host of a 2-host lease leaves its 8 GPUs
    uncharged while it is at fault and the other host's 8 billed; the lease's SLA downtime counts the same share
    (8/16 of the fault's time). Instances nested in a lease are not placements of the lease (their rows belong to
    the instance consumer)."""
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

    from apps.billing.registry import Placement
    from apps.compute.billing import mig_gpu_equivalents
    from apps.scheduling.models import Allocation

    rows = Allocation.objects.filter(consumer_type="lease", host_id=host_id, resource_class__in=("gpu", "mig", "share"),
                                     period__overlap=DateTimeTZRange(start, end, "[)"))
    if gpu_id is not None:
        rows = rows.filter(gpu_id=gpu_id)
    for row in rows.order_by("consumer_id", "period", "id").only("id", "consumer_id", "project_id", "period",
                                                                  "resource_class", "profile", "amount"):
        units = (Decimal(1) if row.resource_class == "gpu" else mig_gpu_equivalents(row.profile)
                 if row.resource_class == "mig" else Decimal(row.amount) / 1000)
        yield Placement("lease", str(row.consumer_id), row.period.lower, row.period.upper, part=str(row.pk),
                        units=units, project_id=str(row.project_id))


def _lease_gpus(lease: Lease, count: int | None = None) -> Decimal:
    """Whole-GPU equivalents of `lease` at `count` (default its `count`; the ``units`` of its per-GPU SKU): hosts × the model's GPUs per host;
    GPUs; MIG GPU instances × the profile's share of a GPU (compute's `mig_gpu_equivalents`: ``3g.40gb`` is 3/7,
    so 3 of them are 9/7); shares × share_milli / 1000."""
    from apps.compute.billing import mig_gpu_equivalents
    from apps.inventory.selectors import gpus_per_host_max

    count = lease.count if count is None else count
    if lease.kind == "hosts":
        return Decimal(count * gpus_per_host_max(lease.gpu_model))
    if lease.kind == "gpus":
        return Decimal(count)
    if lease.kind == "shares":
        return Decimal(count * lease.share_milli) / 1000
    return count * mig_gpu_equivalents(lease.mig_profile)


def lease_price(lease: Lease) -> dict:
    """What `lease` would cost its organization: the reserved price of ``gpu:model=<model>`` (the SKU
    `lease_usage` bills) × the lease's GPUs (`_lease_gpus`) per hour, and over its window ``[start, end)``
    (``estimate_total``); the shape of `apps.billing.selectors.price_quote`."""
    from apps.billing.selectors import price_quote
    from apps.billing.skus import sku_for

    hours = Decimal((lease.end - lease.start).total_seconds()) / 3600
    return price_quote(organization=lease.project.organization, sku=sku_for("gpu", model=lease.gpu_model),
                       pricing_model="reserved", units=_lease_gpus(lease), hours=hours, at=lease.start,
                       sla_tier=lease.sla_tier)


# ---- fragmentation and the on-demand queue (the admin portal's capacity screen) ------------------------------
#: free whole GPUs per model, zone and host. The held GPUs are one uncorrelated subquery (hashed once): as a
#: correlated NOT EXISTS per GPU the plan's estimated cost made PostgreSQL JIT-compile it (65 ms instead of 15).
FREE_NOW_SQL = """
SELECT g.model, z.name, g.host_id,
  count(*) FILTER (WHERE g.id NOT IN (
    SELECT a.gpu_id FROM scheduling_allocation a WHERE a.gpu_id IS NOT NULL AND a.parent_id IS NULL AND NOT a.spot
      AND a.period @> %(now)s::timestamptz)) AS free,
  count(*) AS gpus
FROM inventory_gpu g JOIN inventory_host h ON h.id = g.host_id JOIN inventory_zone z ON z.id = h.zone_id
WHERE h.state = 'available' AND NOT h.spare AND g.health = 'ok' AND g.mode = 'exclusive'
GROUP BY g.model, z.name, g.host_id
"""
#: the whole-GPU requests running now: GPUs per consumer and host (a multi-host cluster counts once per host),
#: counted per model and size
RUNNING_SHAPES_SQL = """
SELECT model, gpus, count(*) FROM (
  SELECT g.model, count(*) AS gpus FROM scheduling_allocation a JOIN inventory_gpu g ON g.id = a.gpu_id
  WHERE a.parent_id IS NULL AND a.consumer_type <> 'lease' AND g.mode = 'exclusive'
    AND a.period @> %(now)s::timestamptz
  GROUP BY a.consumer_id, a.host_id, g.model) r
GROUP BY model, gpus
"""
#: what "typical requests" are when nothing runs yet: one of each common whole-GPU size
DEFAULT_SHAPES = (1, 2, 4, 8)


def _typical_shapes(at: dt.datetime) -> list[tuple[str, int, int]]:
    """(model, GPUs, how many) of the whole-GPU requests running now and waiting in the queue; DEFAULT_SHAPES
    (any model, one each) when there are none."""
    with connection.cursor() as cur:
        cur.execute(RUNNING_SHAPES_SQL, {"now": at})
        shapes = [(model, int(n), int(k)) for model, n, k in cur.fetchall()]
    shapes += [("", int(n), int(k)) for n, k in QueuedRequest.objects.filter(status="waiting", gpus__gt=0)
               .values_list("gpus").annotate(k=Count("id")).order_by("gpus")]
    return shapes or [("", n, 1) for n in DEFAULT_SHAPES]


def fleet_fragmentation(at: dt.datetime | None = None) -> list[dict]:
    """Per GPU model and zone: the free whole GPUs (exclusive mode, healthy, on available hosts, held by nothing
    but spot work now) and how many of them are stranded: FGD's fragmentation measure (the placement policies'
    `FragModel`, Weng et al., ATC 2023) against the typical requests, here the whole-GPU requests running now and
    waiting in the queue (by their GPU count on one host; requests asking for more GPUs than a host has count as
    fitting nowhere). A host's free GPUs count as fragmented for each typical request that cannot fit there (too
    few free GPUs together), weighted by how common the request is; CPU and memory are not considered.

    Returns ``[{"gpu_model", "zone", "hosts", "free_gpus", "fragmented_gpus" (1 decimal), "fragmentation_pct"
    (of the free GPUs), "largest_free_block" (the most free GPUs on one host)}]`` sorted by model and zone."""
    from apps.scheduling.policies import FragModel, NodeBatch, NodeView, PodRequest, PodTypeDistribution

    at = at or clock_now()
    with connection.cursor() as cur:
        cur.execute(FREE_NOW_SQL, {"now": at})
        rows = cur.fetchall()
    shapes = _typical_shapes(at)
    groups: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    for model, zone, host_id, free, gpus in rows:
        groups.setdefault((model, zone), []).append((str(host_id), int(free), int(gpus)))
    out = []
    for (model, zone), hosts in sorted(groups.items()):
        width = max(g for _h, _f, g in hosts)
        requests = [r for m, n, k in shapes if not m or m == model
                    for r in [PodRequest(cpu_milli=0, memory_mib=0, num_gpu=n, gpu_milli=1000)] * k]
        requests = requests or [PodRequest(cpu_milli=0, memory_mib=0, num_gpu=n, gpu_milli=1000)
                                for n in DEFAULT_SHAPES]
        frag = FragModel(PodTypeDistribution.from_requests(requests))
        batch = NodeBatch.from_views([NodeView(name=h, model=model, cpu_free_milli=0, memory_free_mib=0,
                                               gpu_free_milli=(1000,) * free + (0,) * (width - free))
                                      for h, free, _g in hosts])
        stranded = float(frag.host_state(batch)[3].sum()) / frag.total / 1000
        free = sum(f for _h, f, _g in hosts)
        out.append({"gpu_model": model, "zone": zone, "hosts": len(hosts), "free_gpus": free,
                    "fragmented_gpus": round(stranded, 1),
                    "fragmentation_pct": round(100 * stranded / free, 1) if free else 0.0,
                    "largest_free_block": max(f for _h, f, _g in hosts)})
    return out


def queue_figures(at: dt.datetime | None = None, window: dt.timedelta = dt.timedelta(hours=24)) -> dict:
    """The on-demand queue now: ``waiting`` requests and their ``waiting_gpus`` (whole-GPU equivalents),
    ``longest_wait_s`` and ``median_wait_s`` of those waiting (seconds so far; null when none); over the last
    ``window`` (``window_s``): ``placed`` requests and the median and longest wait they had (``placed_wait_p50_s``,
    ``placed_wait_max_s``; null when none), and ``expired`` ones (gave up at their timeout)."""
    import statistics

    at = at or clock_now()
    waiting = list(QueuedRequest.objects.filter(status="waiting").values_list("created_at", "gpus"))
    waits = sorted((at - created).total_seconds() for created, _g in waiting)
    placed = sorted((p - c).total_seconds() for c, p in QueuedRequest.objects.filter(
        status="placed", placed_at__gte=at - window).values_list("created_at", "placed_at"))

    def whole(v):
        return int(v) if v is not None else None

    return {"waiting": len(waiting), "waiting_gpus": sum(g for _c, g in waiting),
            "longest_wait_s": whole(waits[-1] if waits else None),
            "median_wait_s": whole(statistics.median(waits) if waits else None),
            "window_s": int(window.total_seconds()), "placed": len(placed),
            "placed_wait_p50_s": whole(statistics.median(placed) if placed else None),
            "placed_wait_max_s": whole(placed[-1] if placed else None),
            "expired": QueuedRequest.objects.filter(status="expired", updated_at__gte=at - window).count()}
