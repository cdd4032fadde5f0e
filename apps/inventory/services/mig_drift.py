"""MIG drift: the allocation ledger against the GPU instances the node agent reports (docs/adr/0503).

The ledger says which MIG slices tenants hold (`resource_class` `mig`, the profile and its memory slices); the
agent's inventory report (`Gpu.observed["mig"]["layout"]`, written by every inventory sync) says which GPU
instances exist on the host. They must agree. `mig_drift_reconcile` (beat, every few minutes) compares them for
every MIG-mode GPU whose agent reported a layout and records the disagreements in `Gpu.observed["mig_drift"]`:

* `instance_missing`: a running consumer's MIG allocation (not a lease's, which holds capacity only), older than
  `DRIFT_GRACE` (the agent creates the GPU instance after the claim), with no GPU instance of its profile at its
  start slice and none over its slices;
* `instance_differs`: the same, but another GPU instance covers some of its slices;
* `instance_unrecorded`: a GPU instance on the host that neither the ledger nor the inventory record knows
  (made on the host by hand; the inventory sync queues the recorded layout again, which removes it).

A change of a GPU's drift (it appears, changes or clears) is audited as `inventory.gpu.mig_drift` with the list
before and after, and logged. The reconciler only records: the repair is the restore of the recorded layout
(`services.agent`, on the next inventory report) or staff's decision.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now

from ..catalog import gpu_model_get
from ..models import Gpu
from ..states import GpuMode, HostState
from .holders import gpu_holders

log = logging.getLogger("gpucloud.inventory")

#: how long a MIG allocation may exist before its GPU instance must be on the host
DRIFT_GRACE = dt.timedelta(minutes=10)


def _reported(gpu: Gpu) -> list[tuple[str, int, int]] | None:
    """[(profile name, start, end)] of the agent's last report, or None when it reported no layout."""
    mig = (gpu.observed or {}).get("mig") or {}
    if not isinstance(mig.get("layout"), list):
        return None
    spec = gpu_model_get(gpu.model)
    profiles = {p.id: p for p in spec.mig.profiles} if spec and spec.mig else {}
    out = []
    for i in mig["layout"]:
        p = profiles.get(i.get("profile_id"))
        size = i.get("size") or (p.memory if p else 1)
        out.append((p.name if p else str(i.get("profile_id")), int(i["start"]), int(i["start"]) + int(size)))
    return out


def gpu_mig_drift(gpu: Gpu, holders: list[dict], at: dt.datetime) -> list[dict] | None:
    """The drift between `holders` (the GPU's ledger holders, `services.holders`) and the agent's report; None
    when the agent reported no layout. Items: {"code", ...} as listed in the module docstring, sorted."""
    reported = _reported(gpu)
    if reported is None:
        return None
    present = {(name, start) for name, start, _ in reported}
    mig = [h for h in holders if h["resource_class"] == "mig" and h["slices"]]
    drift = []
    for h in mig:
        lo, hi = h["slices"]
        if h["consumer_type"] == "lease" or (h["profile"], lo) in present:
            continue
        if dt.datetime.fromisoformat(h["start"]) > at - DRIFT_GRACE:
            continue
        over = [f"{n}@{s}" for n, s, e in reported if s < hi and lo < e]
        drift.append({"code": "instance_differs" if over else "instance_missing", "allocation_id": h["allocation_id"],
                      "consumer_type": h["consumer_type"], "consumer_id": h["consumer_id"], "profile": h["profile"],
                      "slices": [lo, hi], "reported": over})
    known = {(h["profile"], h["slices"][0]) for h in mig} | {(gi.profile, gi.start) for gi in gpu.gpu_instances.all()}
    drift += [{"code": "instance_unrecorded", "profile": n, "start": s} for n, s, _ in reported if (n, s) not in known]
    return sorted(drift, key=lambda d: (d["code"], d.get("slices", [d.get("start")])))


def mig_drift_reconcile() -> dict:
    """Compare the ledger with the agents' reported layouts for every MIG-mode GPU of a host in service; record
    each GPU's drift (see the module docstring). Idempotent. Returns {"gpus": checked, "drifting": n,
    "changed": n}."""
    at = now()
    gpus = (Gpu.objects.filter(mode=GpuMode.MIG).exclude(host__state=HostState.RETIRED)
            .select_related("host").prefetch_related("gpu_instances"))
    by_host: dict = defaultdict(list)
    for g in gpus:
        by_host[g.host_id].append(g)
    checked = drifting = changed = 0
    for host_id, host_gpus in by_host.items():
        holders = gpu_holders(host_id=host_id, gpu_ids=[g.pk for g in host_gpus], lock=False)
        for gpu in host_gpus:
            drift = gpu_mig_drift(gpu, holders.get(gpu.pk, []), at)
            if drift is None:
                continue
            checked += 1
            drifting += bool(drift)
            before = (gpu.observed or {}).get("mig_drift", [])
            if drift == before:
                continue
            changed += 1
            with transaction.atomic():
                locked = Gpu.objects.select_for_update().get(pk=gpu.pk)
                locked.observed = {**locked.observed, "mig_drift": drift}
                locked.save(update_fields=["observed", "updated_at"])
                audit_record(actor=None, action="inventory.gpu.mig_drift", target=locked,
                             before={"mig_drift": before}, after={"mig_drift": drift})
            log.warning("mig_drift", extra={"gpu": str(gpu.pk), "host": gpu.host.name, "drift": drift})
    return {"gpus": checked, "drifting": drifting, "changed": changed}
