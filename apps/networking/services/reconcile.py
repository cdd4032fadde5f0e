"""Reconcilers: push the desired state in the database to OVN and to each InfiniBand fabric's SM.

Idempotent: each compares before it writes (the OVN driver diffs against its IDL replica; the OpenSM driver
compares the rendered file with the one on disk), so a second run with no database change makes no OVN
transaction and no file write. Results are recorded in `FabricSyncState` (`ovn`, `ib:<fabric>`).
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.drivers import DriverError
from apps.inventory.models import Fabric, HcaPort
from apps.inventory.states import FabricKind

from .. import conf, desired
from ..drivers.ovn import OvnDriver
from ..models import FabricDriftEvent, FabricSyncState
from .ib import virtual_guids_free_released

log = logging.getLogger("gpucloud.networking")
_ovn_drivers: dict[str, OvnDriver] = {}
_ovn_lock = threading.Lock()


@contextmanager
def _exclusive(key: str):
    """One reconcile per backend at a time: a row lock on its FabricSyncState, held for the whole run, taken
    before the desired state is read, so a run never writes an older snapshot over a newer one."""
    with transaction.atomic():
        FabricSyncState.objects.get_or_create(key=key)  # a savepoint; a concurrent create is read back
        FabricSyncState.objects.select_for_update().get(key=key)
        yield


def _record(key: str, *, ok: bool, result: dict, error: str = "", digest: str = "") -> None:
    state, _ = FabricSyncState.objects.get_or_create(key=key)
    state.last_run_at = now()
    if ok:
        state.last_ok_at = state.last_run_at
        state.applied_digest = digest or state.applied_digest
    state.last_error = error
    state.last_result = result
    state.save()


def ovn_driver() -> OvnDriver | None:
    remote = conf.ovn_nb_db()
    if not remote:
        return None
    with _ovn_lock:
        if remote not in _ovn_drivers:
            _ovn_drivers[remote] = OvnDriver(remote)
        return _ovn_drivers[remote]


def ovn_reconcile(*, driver=None) -> dict:
    """Sync every VPC, subnet, port, security group and public IP into OVN. Returns the driver's counts
    (`transactions`, `commands`, created/updated/deleted) or `{"skipped": ...}` when OVN is not configured."""
    driver = driver or ovn_driver()
    if driver is None:
        return {"skipped": "NETWORKING_OVN_NB_DB not set"}
    failure = None
    with _exclusive("ovn"):
        topology = desired.ovn_topology(gateway_chassis=conf.ovn_gateway_chassis())
        try:
            result = driver.sync(topology).as_dict()
        except DriverError as exc:
            failure = exc
        else:
            _record("ovn", ok=True, result=result)
    if failure is not None:
        _record("ovn", ok=False, result={}, error=f"{failure.code}: {failure}")
        raise failure
    return result


def _ib_driver(config: dict):
    kind = config.get("driver", "opensm")
    if kind == "opensm":
        from ..drivers.opensm import OpenSmDriver

        return OpenSmDriver(partitions_path=config["partitions_path"], pid_file=config.get("pid_file"),
                            env=config.get("env") or {})
    if kind == "ufm":
        from ..drivers.ufm import UfmDriver

        return UfmDriver(base_url=config["url"], username=config.get("username", ""),
                         password=config.get("password", ""), verify_tls=config.get("verify_tls", True))
    raise DriverError(f"unknown IB driver {kind!r}", code="unknown_driver")


def ib_fabric_reconcile(*, fabric_id, driver=None, verify: bool | None = None) -> dict:
    """Apply fabric `fabric_id`'s partitions to its SM, then (OpenSM) read back the P_Key tables of a sample of
    physical ports and compare them with what the partitions require. Frees `releasing` virtual GUIDs once
    applied. Returns the driver result plus `verified` / `mismatches`."""
    fabric = Fabric.objects.get(pk=fabric_id)
    config = conf.ib_fabrics().get(fabric.name)
    if driver is None:
        if config is None:
            return {"skipped": f"fabric {fabric.name} has no subnet manager configured"}
        driver = _ib_driver(config)
    config = config or {}
    key = f"ib:{fabric.name}"
    failure = None
    with _exclusive(key):
        partitions = desired.ib_partitions(fabric)
        try:
            out = _ib_apply(fabric, driver, partitions, config, verify, key)
        except DriverError as exc:
            failure = exc
    if failure is not None:
        _record(key, ok=False, result={}, error=f"{failure.code}: {failure}")
        raise failure
    return out


def _ib_apply(fabric: Fabric, driver, partitions, config: dict, verify: bool | None, key: str) -> dict:
    applied_before = FabricSyncState.objects.filter(key=key).exclude(applied_digest="").exists()
    result = driver.apply(partitions, expect_file=applied_before)
    out = result.as_dict()
    if result.drift:
        _drift_record(fabric, key, result)
    mismatches = {}
    if (verify if verify is not None else config.get("verify", True)) and hasattr(driver, "wait_applied"):
        guids = _verify_sample(fabric, partitions, int(config.get("verify_sample", 16)))
        expected = desired.expected_pkey_tables(partitions, guids)
        mismatches = driver.wait_applied(expected, timeout=float(config.get("verify_timeout", 10)))
        out["verified"] = sorted(guids)
        out["mismatches"] = {g: [f"{v:#06x}" for v in vals] for g, vals in mismatches.items()}
    applied = {m.guid for p in partitions for m in p.members}
    out["freed_virtual_guids"] = virtual_guids_free_released(fabric=fabric, applied_guids=applied)
    error = f"P_Key tables differ on {len(mismatches)} port(s)" if mismatches else ""
    _record(key, ok=not mismatches, result=out, error=error, digest=result.digest)
    return out


def _drift_record(fabric: Fabric, key: str, result) -> FabricDriftEvent:
    """Drift is an alarm, not a silent repair: a `FabricDriftEvent` row (counted by the Prometheus gauge
    ``gpucloud_ib_partitions_drift_events``), a system audit event ``networking.ib_fabric.partitions_drift``
    and an error log line, in the reconcile's transaction (docs/networking.md, "Partitions file drift")."""
    detail = {"digest": result.digest, "writes": result.writes}
    event = FabricDriftEvent.objects.create(key=key, fabric=fabric, reason=result.drift_reason or "modified",
                                            restored=result.restored, detail=detail)
    audit_record(actor=None, action="networking.ib_fabric.partitions_drift", target=fabric,
                 after={"fabric": fabric.name, "reason": event.reason, "restored": event.restored,
                        "drift_event": str(event.pk)})
    log.error("partitions_file_drift", extra={"fabric": fabric.name, "reason": event.reason,
                                              "restored": event.restored})
    return event


def _verify_sample(fabric: Fabric, partitions, size: int) -> list[str]:
    """Physical member ports first (they must show their keys), then ports in no partition (default only)."""
    physical = set(HcaPort.objects.filter(fabric=fabric).values_list("port_guid", flat=True))
    members = sorted({m.guid for p in partitions for m in p.members if m.guid in physical})
    others = sorted(physical - set(members))
    return members[:size] + others[:max(1, size // 4)]


def ib_reconcile_all() -> dict:
    """Reconcile every configured InfiniBand fabric; errors are recorded per fabric, not raised."""
    out = {}
    for name in sorted(conf.ib_fabrics()):
        fabric = Fabric.objects.filter(name=name, kind=FabricKind.INFINIBAND).first()
        if fabric is None:
            out[name] = {"skipped": "no such InfiniBand fabric in inventory"}
            continue
        try:
            out[name] = ib_fabric_reconcile(fabric_id=fabric.pk)
        except DriverError as exc:
            out[name] = {"error": f"{exc.code}: {exc}"}
    return out
