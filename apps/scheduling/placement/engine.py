"""Placement: a `PlacementRequest` becomes ranked `Candidate`s through filters and weighers.

Two paths give the same answers for what they cover:

* **fast** (on-demand whole-GPU or CPU-only requests starting now): one indexed SQL pre-ranks hosts on the
  per-host usage summary (`HostUsage`, recomputed by every ledger write), then the device step checks the top
  hosts against the ledger itself. If it finds nothing, the exact path runs.
* **exact** (everything else, dry runs, and every refusal): one SQL computes each host's state and its capacity
  left over the request's period from the ledger; Python applies the filters in a fixed order and counts what
  each removed (`Explanation`), then the device step (NVSwitch partitions / NUMA, MIG geometry, vGPU, shares)
  and, for several hosts, the network topology step.

Filter order: host_state, provisioning_kind, zone, host (a pinned `host_id`), lease_holding, tenant_isolation, affinity, anti_affinity,
gpu_model, gpu_mode, gpu_health, gpu_capacity, vcpu, memory, then the host filters of other apps the request
needs (`needs`: e.g. compute's ``ib_partition``; such a request always takes the exact path), then the device
filters (nvswitch_partition, numa_capacity, mig_geometry, vgpu_capacity, share_capacity) and topology.

``numa_capacity`` (whole GPUs of a VM, i.e. a ``hypervisor`` request with vCPUs or memory): the chosen GPUs' host
NUMA nodes must hold the guest NUMA nodes the VM gets (docs/adr/0510); each path reads the node sizes
(`apps.inventory.numa.node_caps`) only for the hosts that reach its device step.
"""
from __future__ import annotations

import json
import uuid
from functools import lru_cache
from types import SimpleNamespace

from django.db import connection
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Count

from apps.core import clock
from apps.inventory.catalog import gpu_model_get
from apps.inventory.models import VirtualFunction, Zone
from apps.inventory.numa import node_caps
from apps.inventory.states import GpuMode, HostState, ProvisioningKind

from ..ledger import AllocationSpec
from ..ledger import sql as ledger_sql
from . import devices, fractional, sql, weighers
from .explanation import Explanation
from .needs import apply_needs
from .request import Candidate, HostChoice, PlacementRequest, Result
from .topology import select_hosts

FAST_OVERFETCH = 8
#: hosts whose NUMA node sizes the exact path reads at a time (it stops once it has `limit` candidates)
NUMA_CHUNK = 256


class _Ctx:
    """Per-call parameters shared by the SQL and the filters. ``ideal``: the fleet as if nothing were allocated
    and every host that is not retired were available with healthy GPUs in the mode the form needs (the
    question "could this fleet ever hold the request?"; `apps.scheduling.services.admission`)."""

    def __init__(self, req: PlacementRequest, ideal: bool = False):
        self.req = req
        self.ideal = ideal
        self.now = clock.now()
        self.window = DateTimeTZRange(req.start or self.now, req.end, "[)")
        self.policy = weighers.policy_for(req)
        nested = req.lease_id is not None
        self.conflict = "FALSE" if ideal else sql.conflict_predicate(consumer_type=req.consumer_type,
                                                                     spot=req.spot, nested=nested)
        nested = nested and not ideal
        self.model_ok = "(cardinality(%(models)s::text[]) = 0 OR g.model = ANY(%(models)s::text[]))"
        self.lease_gpu = ("AND g.id IN (SELECT la.gpu_id FROM scheduling_allocation la WHERE la.consumer_id = "
                          "%(lease)s AND la.consumer_type = 'lease' AND la.period @> %(window)s)") if nested else ""
        self.params = {"window": self.window, "models": list(req.gpu_models), "mode": req.gpu_mode or GpuMode.EXCLUSIVE,
                       "lease": req.lease_id, "project": req.project_id,
                       # a GPU that is not scrubbed (`inventory.Gpu.scrub_state`) is never placed for a window
                       # that starts now; a future window may count it (the scrub takes seconds)
                       "starts_now": self.window.lower <= self.now}
        self.zone_id = None
        if req.zone:
            self.zone_id = Zone.objects.filter(name=req.zone).values_list("id", flat=True).first() or uuid.UUID(int=0)
        #: a VM's whole GPUs: the guest NUMA nodes must fit the GPUs' host nodes (`devices.choose_indexes`'s fit)
        self.numa = bool(req.gpus_per_host and req.provisioning_kind == ProvisioningKind.HYPERVISOR
                         and (req.vcpus or req.memory_mib))
        self.group_hosts: set | None = None
        if req.affinity_group and not ideal:
            with connection.cursor() as cur:
                cur.execute(sql.GROUP_HOSTS, {"group": req.affinity_group, "project": req.project_id,
                                              "window": self.window})
                self.group_hosts = {host_id for (host_id,) in cur.fetchall()}

    def fit(self, caps: dict, host_id) -> tuple | None:
        """The device step's `fit` argument for `host_id` (None when the request has no guest NUMA nodes)."""
        return (self.req.vcpus, self.req.memory_mib, caps.get(host_id, ())) if self.numa else None

    def countable_used(self, holders: int, workloads: int) -> int:
        r = self.req
        if r.consumer_type == "lease":
            return holders
        if r.spot or r.lease_id:
            return workloads
        return max(holders, workloads)


def place(req: PlacementRequest, *, limit: int = 5, explain: bool = False,
          exclude_hosts: frozenset = frozenset(), ideal: bool = False) -> Result:
    """Ranked candidates for `req` (best first, at most `limit`; a multi-host request gets one host set).
    `explain=True` always runs the exact path and evaluates every host. `ideal=True` asks the same of the
    empty fleet (see `_Ctx`; exact path, explained). Reads only; claims nothing."""
    ctx = _Ctx(req, ideal=ideal)
    if ideal or req.host_id is not None or req.needs:
        return _exact(ctx, limit, ideal or explain, exclude_hosts)
    if (req.is_on_demand_now and req.gpu_form in ("gpu", "none") and not explain and not req.affinity_group
            and not (req.zone and ctx.zone_id == uuid.UUID(int=0))):
        result = _fast(ctx, limit, exclude_hosts)
        if result.candidates:
            return result
    elif _window_eligible(ctx, explain):
        result, complete = _window(ctx, limit, exclude_hosts)
        if result.candidates or complete:
            return result
    return _exact(ctx, limit, explain, exclude_hosts)


# ---- fast path ------------------------------------------------------------------------------------------
def _fast(ctx: _Ctx, limit: int, exclude: frozenset) -> Result:
    req = ctx.req
    n_fetch = limit * FAST_OVERFETCH if req.hosts == 1 else max(req.hosts * 50, 2000)
    params = {**ctx.params, "kind": req.provisioning_kind, "zone": ctx.zone_id, "gpus": req.gpus_per_host,
              "vcpus": req.vcpus, "memory": req.memory_mib, "dedicated": req.dedicated,
              "exclude": list(exclude), "limit": n_fetch}
    direction = "DESC" if ctx.policy == "spread" else "ASC"
    models = list(req.gpu_models)
    if len(models) == 1:  # equality on the leading index column keeps the scan in rank order
        model_filter, model_order, params["model"] = "u.gpu_model = %(model)s AND", f"u.gpu_model {direction},", models[0]
    elif models:
        model_filter, model_order = "u.gpu_model = ANY(%(models)s::text[]) AND", ""
    else:
        model_filter, model_order = "", ""
    with connection.cursor() as cur:
        cur.execute(sql.FAST_HOSTS.format(direction=direction, model_filter=model_filter, model_order=model_order,
                                          numa=sql.NUMA_COLUMNS if ctx.numa else sql.NO_NUMA_COLUMNS), params)
        hosts = [sql.FastHostRow._make(r) for r in cur.fetchall()]
    exp = Explanation(len(hosts), "fast")
    if req.hosts > 1:
        return _fast_gang(ctx, hosts, exp)
    choices: list[tuple[tuple, HostChoice]] = []
    # the device step reads the ledger for a few hosts at a time, best ranked first
    step = limit + 2 if req.hosts == 1 else len(hosts)
    for lo in range(0, len(hosts), max(step, 1)):
        batch = hosts[lo:lo + step]
        free = _free_gpus(ctx, [h.id for h in batch]) if req.gpus_per_host else {}
        caps = _row_caps(ctx, batch)
        for rank, (hid, name, nvs, *_numa) in enumerate(batch, start=lo):
            gpus, detail, score = [], {}, 0.0
            if req.gpus_per_host:
                got, score = devices.choose_whole_gpus(req.gpus_per_host, free.get(hid, []), nvs, ctx.fit(caps, hid))
                if got is None:
                    exp.remove(_DEVICE_FILTER.get(score, score), score)
                    continue
                gpus, detail = got
            choices.append(((rank, -score), _choice(req, hid, name, gpus, detail)))
        if req.hosts == 1 and len(choices) >= limit:
            break
    exp.evaluated = len(choices)
    return _finish(ctx, choices, exp, limit)


def _fast_gang(ctx: _Ctx, hosts: list[sql.FastHostRow], exp: Explanation, rounds: int = 5) -> Result:
    """Several hosts: choose the network-tightest set on the summary first, then check only those hosts'
    devices against the ledger; a host that fails is dropped and the set chosen again."""
    req = ctx.req
    meta = {h.id: h for h in hosts}
    excluded: set = set()
    for _ in range(rounds):
        picked, info = select_hosts([h.id for h in hosts if h.id not in excluded], req.hosts, req.topology,
                                    ctx.policy)
        if picked is None:
            break
        free = _free_gpus(ctx, picked) if req.gpus_per_host else {}
        caps = _row_caps(ctx, [meta[h] for h in picked])
        chosen = []
        for hid in picked:
            name, nvs = meta[hid].name, meta[hid].nvswitch_system
            gpus, detail = [], {}
            if req.gpus_per_host:
                got, why = devices.choose_whole_gpus(req.gpus_per_host, free.get(hid, []), nvs, ctx.fit(caps, hid))
                if got is None:
                    exp.remove(_DEVICE_FILTER.get(why, why), why)
                    excluded.add(hid)
                    continue
                gpus, detail = got
            chosen.append(_choice(req, hid, name, gpus, detail))
        if len(chosen) == req.hosts:
            exp.evaluated = exp.remaining = len(hosts) - len(excluded)
            return Result([_gang_candidate(chosen, info)], exp.as_dict())
    return Result([], exp.as_dict())


def _gang_candidate(chosen: list[HostChoice], info: dict) -> Candidate:
    """Score: fewer leaves per rail first, then fewer spine groups, then fewer fabrics (higher is better)."""
    score = -(info["max_leaves_per_rail"] * 100 + info["spine_groups"] * 10 + info["fabrics"])
    return Candidate(chosen, float(score), info)


def _node_caps(ctx: _Ctx, host_ids: list) -> dict:
    """{host id: `NodeCaps`} of some hosts (the NUMA nodes' CPUs and memory, `apps.inventory.numa.node_caps`), read
    only when the request has guest NUMA nodes to fit ({} otherwise)."""
    if not ctx.numa or not host_ids:
        return {}
    with connection.cursor() as cur:
        cur.execute(sql.HOST_NUMA, {"hosts": list(host_ids)})
        return _row_caps(ctx, cur.fetchall())


def _row_caps(ctx: _Ctx, rows) -> dict:
    """{host id: `NodeCaps`} from rows that end with `sql.NUMA_COLUMNS` after the host id (HOST_NUMA's, or
    FAST_HOSTS's, which carry them so the fast path needs no second query)."""
    if not ctx.numa:
        return {}
    # jsonb comes back as text through Django's connection (its JSONField decodes it)
    return {r[0]: _caps(nodes, cores, threads, memory, numa if isinstance(numa, str) else json.dumps(numa or ""))
            for r in rows for nodes, cores, threads, memory, numa in [r[-5:]]}


@lru_cache(maxsize=1024)
def _caps(numa_nodes: int, cpu_cores: int, cpu_threads: int, memory_mib: int, reported: str):
    """`node_caps` of a host by its recorded counts and the agent's NUMA report (JSON text): hosts alike share one."""
    host = SimpleNamespace(numa_nodes=numa_nodes, cpu_cores=cpu_cores, cpu_threads=cpu_threads,
                           memory_mib=memory_mib, observed={"host": {"numa": json.loads(reported)}})
    return node_caps(host)


def _free_gpus(ctx: _Ctx, host_ids: list) -> dict:
    out: dict = {}
    with connection.cursor() as cur:
        cur.execute(sql.FREE_GPUS.format(model_ok=ctx.model_ok, conflict=ctx.conflict),
                    {**ctx.params, "hosts": host_ids})
        for host_id, gpu_id, index, numa, model in cur.fetchall():
            out.setdefault(host_id, []).append(devices.GpuRow(gpu_id, index, numa, model))
    return out


# ---- window fast path -----------------------------------------------------------------------------------
WINDOW_OVERFETCH = 8


def _window_eligible(ctx: _Ctx, explain: bool) -> bool:
    """Whole GPUs over a window (leases; on-demand with a start or end), not nested in a lease, without
    affinity groups: every filter the exact path applies to such a request is expressible in SQL."""
    req = ctx.req
    return (not explain and req.gpu_form == "gpu" and not req.is_on_demand_now and req.lease_id is None
            and not req.affinity_group and not (req.zone and ctx.zone_id == uuid.UUID(int=0)))


def _used_sql(ctx: _Ctx, holders: str, workloads: str) -> str:
    """SQL twin of `_Ctx.countable_used`."""
    r = ctx.req
    if r.consumer_type == "lease":
        return holders
    if r.spot or r.lease_id:
        return workloads
    return f"greatest({holders}, {workloads})"


def _window(ctx: _Ctx, limit: int, exclude: frozenset) -> tuple[Result, bool]:
    """Window fast path: `sql.WINDOW_HOSTS` filters and ranks in SQL and returns only the best hosts (a single
    host: ``limit * WINDOW_OVERFETCH`` of them; a gang: every host with enough free GPUs) with their free GPUs
    over the window, computed with the exact path's predicate; then the exact path's device step (NVSwitch
    partition / NUMA) and, for gangs, its topology step on the same ranked hosts. Returns (result, complete):
    `complete` is True when every host that could pass was evaluated, so an empty result is the exact path's
    refusal too and the exact path is not run for candidates (`placement_claim` still runs it with
    ``explain=True`` to explain the refusal)."""
    req = ctx.req
    n_fetch = limit * WINDOW_OVERFETCH if req.hosts == 1 else 0
    query = sql.WINDOW_HOSTS.format(
        conflict=ctx.conflict, model_ok=ctx.model_ok, holders=ledger_sql.HOLDERS, workloads=ledger_sql.WORKLOADS,
        direction="DESC" if ctx.policy == "spread" else "ASC",
        vcpus_used=_used_sql(ctx, "coalesce(cc.vcpu_h, 0)", "coalesce(cc.vcpu_w, 0)"),
        memory_used=_used_sql(ctx, "coalesce(cc.mem_h, 0)", "coalesce(cc.mem_w, 0)"),
        limit="LIMIT %(limit)s" if n_fetch else "")
    params = {**ctx.params, "kind": req.provisioning_kind, "zone": ctx.zone_id, "gpus": req.gpus_per_host,
              "vcpus": req.vcpus, "memory": req.memory_mib, "dedicated": req.dedicated,
              "exclude": list(exclude), "limit": n_fetch}
    with connection.cursor() as cur:
        cur.execute(query, params)
        rows = [sql.WindowHostRow._make(r) for r in cur.fetchall()]
    exp = Explanation(len(rows), "window")
    passed = []
    caps = _node_caps(ctx, [r.id for r in rows])
    for r in rows:
        key = weighers.host_key(ctx.policy, len(r.free_idx) - req.gpus_per_host, r.vcpus_free - req.vcpus)
        free = tuple(zip(r.free_idx, r.free_numa, strict=True))
        picked, detail, score = devices.choose_indexes(req.gpus_per_host, r.nvswitch_system or "", free,
                                                       ctx.fit(caps, r.id))
        if picked is None:
            exp.remove(_DEVICE_FILTER[detail], _REASON_TEXT[detail])
            continue
        passed.append(((key, -score, str(r.id)), r.id, r.name, dict(free), picked, detail))
        if req.hosts == 1 and len(passed) >= limit:
            break
    complete = not n_fetch or len(rows) < n_fetch or len(passed) >= limit
    exp.evaluated = len(passed)
    if req.hosts == 1:
        passed.sort(key=lambda t: t[0])
        build = passed[:limit]
    else:  # a gang: the topology step chooses among every host that passed
        build = passed
    choices = []
    for sort_key, hid, name, numa_of, picked, detail in build:
        gpus = [devices.GpuRow(None, i, numa_of[i]) for i in picked]
        choices.append((sort_key, _choice(req, hid, name, gpus, devices.detail_dict(detail))))
    return _finish(ctx, choices, exp, limit, len(passed)), complete


# ---- exact path -----------------------------------------------------------------------------------------
_DEVICE_FILTER = {
    "gpu_capacity": "gpu_capacity",
    "nvswitch_partition_size": "nvswitch_partition",
    "nvswitch_partition_busy": "nvswitch_partition",
    "mig_geometry": "mig_geometry",
    "mig_unsupported": "mig_geometry",
    "mig_profile_unsupported": "mig_geometry",
    "vgpu_capacity": "vgpu_capacity",
    "vgpu_type_unsupported": "vgpu_capacity",
    "share_capacity": "share_capacity",
    "vf_capacity": "vf_capacity",
    "numa_capacity": "numa_capacity",
}
_REASON_TEXT = {
    "nvswitch_partition_size": "no NVSwitch partition has exactly the requested number of GPUs",
    "nvswitch_partition_busy": "no NVSwitch partition of that size has all its GPUs free",
    "mig_geometry": "no GPU has room for the MIG profile at an allowed start slice",
    "mig_unsupported": "the GPU model does not support MIG",
    "mig_profile_unsupported": "the MIG profile does not exist for the GPU model",
    "vgpu_capacity": "no GPU has room for one more vGPU of the type (one type per GPU)",
    "vgpu_type_unsupported": "the vGPU type does not exist for the GPU model",
    "share_capacity": "no shared-mode GPU has the share free",
    "gpu_capacity": "fewer free GPUs than requested",
    "vf_capacity": "no GPU that hands vGPUs to VMs as SR-IOV VFs has a free VF (enable VFs on the host)",
    "numa_capacity": "the GPUs' host NUMA nodes cannot hold the VM's memory and vCPUs (bound to its GPUs' nodes)",
}


def _host_rows(ctx: _Ctx) -> list[sql.ExactHostRow]:
    free = f"{ctx.model_ok} AND g.mode = %(mode)s AND g.health = 'ok' AND (g.scrub_state = 'clean' OR NOT %(starts_now)s) AND b.gpu_id IS NULL {ctx.lease_gpu}"
    holders, workloads = ledger_sql.HOLDERS, ledger_sql.WORKLOADS
    if ctx.ideal:
        free, holders, workloads = ctx.model_ok, "FALSE", "FALSE"
    query = sql.EXACT_HOSTS.format(conflict=ctx.conflict, model_ok=ctx.model_ok, free=free,
                                   holders=holders, workloads=workloads)
    with connection.cursor() as cur:
        cur.execute(query, ctx.params)
        return [sql.ExactHostRow._make(r) for r in cur.fetchall()]


def _lease_hosts(ctx: _Ctx) -> set:
    with connection.cursor() as cur:
        cur.execute(sql.LEASE_HOLDING, {"lease": ctx.req.lease_id, "window": ctx.window})
        return {host_id for host_id, _gpu_id in cur.fetchall()}


def _host_filters(ctx: _Ctx, row: sql.ExactHostRow, exp: Explanation, lease_hosts: set | None) -> bool:
    """Apply the host-level filters to one EXACT_HOSTS row; record the first that removes it."""
    req = ctx.req
    hid, state, zone_id, kind, dedicated_pid = row.id, row.state, row.zone_id, row.provisioning_kind, \
        row.dedicated_project_id
    models = "|".join(req.gpu_models) or "any model"
    if ctx.ideal:  # only what no operator action short of changing the hardware can fix
        checks = [("host_state", state == HostState.RETIRED, state),
                  ("provisioning_kind", bool(req.provisioning_kind) and kind != req.provisioning_kind, kind),
                  ("zone", ctx.zone_id is not None and zone_id != ctx.zone_id, "outside the requested zone"),
                  ("host", req.host_id is not None and hid != req.host_id, "not the pinned host")]
        if req.gpu_form != "none":
            checks.append(("gpu_model", row.n_model < (req.gpus_per_host or 1), f"fewer GPUs of {models}"))
        checks += [("vcpu", row.cpu_threads < req.vcpus, f"fewer than {req.vcpus} vCPUs"),
                   ("memory", row.memory_mib < req.memory_mib, f"less than {req.memory_mib} MiB")]
        return _first_failed(checks, exp)
    checks = [
        ("host_state", state != HostState.AVAILABLE, state),
        ("host_state", row.spare, "spare"),  # the spare pool: only a lease's host replacement claims it
        ("provisioning_kind", bool(req.provisioning_kind) and kind != req.provisioning_kind, kind),
        ("zone", ctx.zone_id is not None and zone_id != ctx.zone_id, "outside the requested zone"),
        ("host", req.host_id is not None and hid != req.host_id, "not the pinned host"),
        ("lease_holding", lease_hosts is not None and hid not in lease_hosts, "not held by the lease"),
        ("tenant_isolation", dedicated_pid is not None and dedicated_pid != req.project_id,
         "dedicated to another project"),
        ("tenant_isolation", req.dedicated and bool(set(row.projects) - {req.project_id}),
         "runs other projects' workloads"),
        ("affinity", ctx.group_hosts is not None and not req.anti_affinity and bool(ctx.group_hosts)
         and hid not in ctx.group_hosts, "no member of the affinity group here"),
        ("anti_affinity", ctx.group_hosts is not None and req.anti_affinity and hid in ctx.group_hosts,
         "a member of the anti-affinity group runs here"),
    ]
    if req.gpu_form != "none":
        need = req.gpus_per_host or 1
        checks += [
            ("gpu_model", row.n_model == 0, f"no GPU of {models}"),
            ("gpu_mode", row.n_mode == 0, f"no GPU in {req.gpu_mode} mode"),
            ("gpu_health", row.n_healthy < need, "too few healthy, scrubbed GPUs"),
        ]
        if req.gpu_form == "gpu":
            checks.append(("gpu_capacity", len(row.free_idx) < need,
                           "no free GPU" if need == 1 else f"fewer than {need} free GPUs"))
    checks += [
        ("vcpu", row.cpu_threads - ctx.countable_used(row.vcpu_h, row.vcpu_w) < req.vcpus,
         f"fewer than {req.vcpus} vCPUs free"),
        ("memory", row.memory_mib - ctx.countable_used(row.mem_h, row.mem_w) < req.memory_mib,
         f"less than {req.memory_mib} MiB free"),
    ]
    return _first_failed(checks, exp)


def _first_failed(checks: list, exp: Explanation) -> bool:
    for name, failed, reason in checks:
        if failed:
            exp.remove(name, reason)
            return False
    return True


def _exact(ctx: _Ctx, limit: int, explain: bool, exclude: frozenset) -> Result:
    req = ctx.req
    rows = [r for r in _host_rows(ctx) if r.id not in exclude]
    exp = Explanation(len(rows), "exact")
    exp.declare("host_state")
    lease_hosts = _lease_hosts(ctx) if req.lease_id and not ctx.ideal else None
    survivors = [r for r in rows if _host_filters(ctx, r, exp, lease_hosts)]
    if req.needs:
        survivors = apply_needs(req, survivors, exp, ideal=ctx.ideal)
    if req.gpu_form in ("gpu", "none"):
        choices, passed = _whole_gpu_choices(ctx, survivors, exp, limit, explain)
    else:
        choices = _fractional_choices(ctx, survivors, exp)
        passed = len(choices)
    exp.evaluated = passed
    return _finish(ctx, choices, exp, limit, passed)


def _whole_gpu_choices(ctx: _Ctx, survivors: list[sql.ExactHostRow], exp: Explanation, limit: int,
                       explain: bool) -> tuple[list, int]:
    """Rank the survivors, run the device step (memoised per free-GPU pattern) and build `HostChoice`s only for
    what can be returned. Returns (choices, how many hosts passed the device step)."""
    req = ctx.req
    ranked = []
    for r in survivors:
        free_vcpus = r.cpu_threads - ctx.countable_used(r.vcpu_h, r.vcpu_w) - req.vcpus
        ranked.append((weighers.host_key(ctx.policy, len(r.free_idx) - req.gpus_per_host, free_vcpus), r))
    ranked.sort(key=lambda t: (t[0], str(t[1].id)))
    passed = []
    caps: dict = {}
    for pos, (key, r) in enumerate(ranked):
        picked, detail, score = (), (), 0.0
        if ctx.numa and pos % NUMA_CHUNK == 0:
            caps = _node_caps(ctx, [x.id for _, x in ranked[pos:pos + NUMA_CHUNK]])
        if req.gpus_per_host:
            picked, detail, score = devices.choose_indexes(req.gpus_per_host, r.nvswitch_system or "",
                                                           tuple(zip(r.free_idx, r.free_numa, strict=True)),
                                                           ctx.fit(caps, r.id))
            if picked is None:
                exp.remove(_DEVICE_FILTER[detail], _REASON_TEXT[detail])
                continue
        passed.append(((key, -score, str(r.id)), r, picked, detail))
        if req.hosts == 1 and len(passed) >= limit and not explain:
            break
    passed.sort(key=lambda t: t[0])
    build = passed if req.hosts > 1 else passed[:limit]
    choices = []
    for sort_key, r, picked, detail in build:
        numa_of = dict(zip(r.free_idx, r.free_numa, strict=True))
        gpus = [devices.GpuRow(None, i, numa_of[i]) for i in picked]
        choices.append((sort_key, _choice(req, r.id, r.name, gpus, devices.detail_dict(detail))))
    return choices, len(passed)


def _occupancy(ctx: _Ctx, host_ids: list) -> dict:
    """{host id: [GpuRow]}: each GPU's allocations over the window, plus, for the fleet as it is (not the ideal
    one), the GPU instances recorded on it that no allocation accounts for (made outside placement, e.g. by a
    staff command): they occupy their slices as ``mig`` rows marked ``outside``, so the MIG planner places next
    to them and a request that cannot fit is refused here, not later by the agent command's planner. A GPU with a
    layout change queued for its agent is left out until the agent reports it."""
    gpu_ok = "TRUE" if ctx.ideal else (
        "g.mode = %(mode)s AND g.health = 'ok' AND (g.scrub_state = 'clean' OR NOT %(starts_now)s) AND "
        + sql.NO_LAYOUT_CHANGE_PENDING)
    query = sql.GPU_OCCUPANCY.format(model_ok=ctx.model_ok, conflict=ctx.conflict, lease_gpu=ctx.lease_gpu,
                                     gpu_ok=gpu_ok, gpu_instances="'[]'::json" if ctx.ideal else sql.GPU_INSTANCES)
    out: dict = {}
    with connection.cursor() as cur:
        cur.execute(query, {**ctx.params, "hosts": host_ids})
        for host_id, gid, index, numa, model, occ, gis in cur.fetchall():
            held = {(a["profile"], a["lo"]) for a in occ if a["rc"] == "mig"}
            occ = occ + [{"rc": "mig", "lo": gi["start"], "hi": gi["start"] + gi["size"], "amount": 1,
                          "profile": gi["profile"], "parent": None, "outside": True}
                         for gi in gis if (gi["profile"], gi["start"]) not in held]
            out.setdefault(host_id, []).append(devices.GpuRow(gid, index, numa, model, tuple(occ)))
    return out


def _vf_filter(req, occ: dict):
    """For a VM's MIG slice or vGPU: on GPU models whose catalog backs vGPUs with SR-IOV VFs (Hopper and later, per
    NVIDIA's vGPU user guide), each MIG/vGPU allocation uses one VF, so a GPU qualifies only while its inventory has
    more VFs than such allocations. Returns a predicate over GpuRow, or None when the rule does not apply."""
    if req.provisioning_kind != ProvisioningKind.HYPERVISOR or req.gpu_form not in ("mig", "vgpu"):
        return None
    rows = [g for gpus in occ.values() for g in gpus]
    sriov = [g for g in rows if (spec := gpu_model_get(g.model)) is not None and spec.vgpu_backing == "sriov_vf"]
    counts = dict(VirtualFunction.objects.filter(gpu_id__in=[g.id for g in sriov]).exclude(pci_address="")
                  .values("gpu_id").annotate(n=Count("id")).values_list("gpu_id", "n"))
    sriov_ids = {g.id for g in sriov}

    def ok(g) -> bool:
        if g.id not in sriov_ids:
            return True
        held = sum(1 for a in g.occupancy if a["rc"] in ("mig", "vgpu") and not a.get("outside"))
        return counts.get(g.id, 0) > held

    return ok


def _fractional_choices(ctx: _Ctx, survivors: list[sql.ExactHostRow], exp: Explanation) -> list:
    """Device step and ranking for a share, a MIG slice or a vGPU.

    The device step (`devices.mig_options` / `vgpu_options` / `choose_share`) keeps the hosts with a GPU that can
    take the request under NVIDIA's rules and proposes the GPU (and MIG start slice) on each. The packing policy
    (`weighers.policy_scores`, ``ours``) then scores every such host from the milli-GPU view of its GPUs
    (`fractional.policy_free_milli`: a GPU the device step refused counts as full) and the request's milli
    (`fractional.fractional_milli`). Hosts are ordered by `weighers.fractional_key` (policy score first, device
    score second). Inside the chosen host a share goes to the policy's GPU (as before); a MIG slice or a vGPU
    stays on the device step's GPU and start slice: the MIG planner and the vGPU rules are the authority there,
    the policy only ranks hosts. ``detail["policy_score"]`` is set for every host the policy scored."""
    req = ctx.req
    occ = _occupancy(ctx, [r.id for r in survivors])
    vf_ok = _vf_filter(req, occ)
    found = []
    for r in survivors:
        gpus = occ.get(r.id, [])
        if vf_ok is not None:
            usable = [g for g in gpus if vf_ok(g)]
            if gpus and not usable:
                exp.remove("vf_capacity", _REASON_TEXT["vf_capacity"])
                continue
            gpus = usable
        placeable: set = set()
        if req.gpu_form == "mig":
            options, reason = devices.mig_options(req.mig_profile, gpus)
            got, score = devices.best_option(options, reason)
            placeable = {o[0].index for o in options}
        elif req.gpu_form == "vgpu":
            options, reason = devices.vgpu_options(req.vgpu_type, gpus)
            got, score = devices.best_option(options, reason)
            got = got[0] if got is not None else None
            placeable = {o[0].index for o in options}
        else:
            got, score = devices.choose_share(req.share_milli, gpus)
        if got is None:
            exp.remove(_DEVICE_FILTER[score], _REASON_TEXT[score])
            continue
        found.append((r, got, score, gpus, placeable))
    policy_scores = {}
    if found:
        name = req.mig_profile or req.vgpu_type
        hosts = []
        for r, _, _, gpus, placeable in found:
            model = gpus[0].model if gpus else ""
            milli = fractional.fractional_milli(req.gpu_form, model, name, req.share_milli)
            hosts.append(weighers.PolicyHost(
                name=str(r.id), model=model, cpu_free_milli=(r.cpu_threads - ctx.countable_used(r.vcpu_h, r.vcpu_w)) * 1000,
                memory_free_mib=r.memory_mib - ctx.countable_used(r.mem_h, r.mem_w),
                gpu_free_milli=tuple(fractional.policy_free_milli(req.gpu_form, g, milli, g.index in placeable)
                                     for g in gpus),
                request_milli=milli or 0))
        policy_scores = weighers.policy_scores(req, hosts)
    choices = []
    for r, got, score, gpus, _ in found:
        pscore, pos = policy_scores.get(str(r.id), (None, None))
        detail: dict = {} if pscore is None else {"policy_score": pscore}
        if req.gpu_form == "mig":
            g, p = got
            spec = AllocationSpec(r.id, "mig", gpu_id=g.id, slices=(p.start, p.end), profile=p.profile)
            detail.update(gpu_index=g.index, mig_start=p.start)
        elif req.gpu_form == "vgpu":
            g = got
            spec = AllocationSpec(r.id, "vgpu", gpu_id=g.id, profile=req.vgpu_type)
            detail["gpu_index"] = g.index
        else:
            g = gpus[pos] if pscore is not None else got
            spec = AllocationSpec(r.id, "share", gpu_id=g.id, amount=req.share_milli)
            detail["gpu_index"] = g.index
        choice = _choice(req, r.id, r.name, [], detail)
        choice.specs.insert(0, spec)
        choices.append((weighers.fractional_key(ctx.policy, pscore, score, r.id), choice))
    return choices


# ---- common ---------------------------------------------------------------------------------------------
def _choice(req: PlacementRequest, host_id, name: str, gpus: list, detail: dict) -> HostChoice:
    specs = [AllocationSpec(host_id, "gpu", gpu_id=g.id) for g in gpus]
    if req.vcpus:
        specs.append(AllocationSpec(host_id, "vcpu", amount=req.vcpus))
    if req.memory_mib:
        specs.append(AllocationSpec(host_id, "memory_mib", amount=req.memory_mib))
    if gpus:
        detail = {**detail, "gpu_indexes": [g.index for g in gpus]}
    return HostChoice(host_id, name, specs, detail)


def _resolve_gpu_ids(choices: list[HostChoice]) -> None:
    """Fill the GPU ids of whole-GPU specs chosen by index (exact path) - only for the returned candidates."""
    todo = [c for c in choices if any(s.resource_class == "gpu" and s.gpu_id is None for s in c.specs)]
    if not todo:
        return
    with connection.cursor() as cur:
        cur.execute(sql.GPU_IDS, {"hosts": [c.host_id for c in todo]})
        ids = {(h, i): g for h, i, g in cur.fetchall()}
    for c in todo:
        indexes = iter(c.detail.get("gpu_indexes", []))
        c.specs = [AllocationSpec(s.host_id, s.resource_class, gpu_id=ids[(c.host_id, next(indexes))])
                   if s.resource_class == "gpu" and s.gpu_id is None else s for s in c.specs]


def _finish(ctx: _Ctx, choices: list, exp: Explanation, limit: int, passed: int | None = None) -> Result:
    req = ctx.req
    choices.sort(key=lambda t: t[0])
    ordered = [c for _, c in choices]
    if req.hosts == 1:
        exp.remaining = len(ordered) if passed is None else passed
        _resolve_gpu_ids(ordered[:limit])
        cands = [Candidate([c], float(len(ordered) - i)) for i, c in enumerate(ordered[:limit])]
        return Result(cands, exp.as_dict())
    exp.declare("topology")
    if len(ordered) < req.hosts:
        exp.remove("topology", f"only {len(ordered)} suitable hosts for {req.hosts}", len(ordered))
        exp.note("topology", f"needs {req.hosts} hosts")
        return Result([], exp.as_dict())
    by_id = {c.host_id: c for c in ordered}
    picked, info = select_hosts([c.host_id for c in ordered], req.hosts, req.topology, ctx.policy)
    if picked is None:
        exp.remove("topology", info["reason"], len(ordered))
        exp.note("topology", f"constraint {info.get('constraint')}: {info['reason']}")
        exp.remaining = 0
        out = exp.as_dict()
        out["topology"] = info
        return Result([], out)
    exp.remaining = len(ordered)
    _resolve_gpu_ids([by_id[h] for h in picked])
    return Result([_gang_candidate([by_id[h] for h in picked], info)], exp.as_dict())
