"""Node-agent side of the control plane: enrollment tokens, enrollment, heartbeats, inventory sync, commands.

Protocol (docs/fleet.md, "Node agent"):

1. Staff create a one-time enrollment token for a host (`enrollment_token_create`), valid `ttl_s` seconds.
2. The agent POSTs it with its discovered inventory to `/api/v1/agent/enroll`; `agent_enroll` spends the token,
   syncs the inventory and returns an agent credential; an `enrolling` host stays so until apps.health's acceptance
   check passed (`HOST_ACCEPTANCE_CHECK`; off: it moves `enrolling -> available` here)
   (`<prefix>.<secret>`, shown once; only its SHA-256 is stored).
3. The agent heartbeats and polls `/api/v1/agent/commands` with `Authorization: Agent <credential>`.
4. Staff (or other services) queue commands with `agent_command_enqueue`: every MIG change is validated by the
   planner here, so a layout the planner rejects never reaches the agent. The agent executes each command id at
   most once and reports; `agent_command_report` applies the reported state and is idempotent; a command that is a step of a GPU's scrub
   moves that GPU towards `clean` or `scrub_failed` (`services.scrub`).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import logging
import secrets
import uuid
from datetime import timedelta

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import Conflict, NotFound, ValidationFailed
from apps.core.transitions import transition

from ..catalog import gpu_model_get, nvswitch_partitions
from ..errors import Code, GpuNotFound, MigLayoutRejected, PartitionConflict
from ..mig import mig_plan
from ..models import (
    AgentCommand,
    AgentCredential,
    EnrollmentToken,
    Gpu,
    GpuInstance,
    HcaPort,
    Host,
    Incident,
    VirtualFunction,
)
from ..states import HOST_TRANSITIONS, CommandKind, CommandStatus, GpuHealth, GpuMode, HostState
from . import last_seen
from .holders import gpu_guard_free, vf_guard_free
from .scrub import gpu_scrub_progress

log = logging.getLogger("gpucloud.inventory")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _issue() -> tuple[str, str, str]:
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return prefix, secret, f"{prefix}.{secret}"


def _split(token: str) -> tuple[str, str]:
    prefix, _, secret = (token or "").strip().partition(".")
    return prefix, secret


# --- enrollment ---------------------------------------------------------------------------------------------
def enrollment_token_create(*, actor, host: Host, ttl_s: int = 3600) -> tuple[EnrollmentToken, str]:
    """Issue a one-time token for `host`; returns (row, clear token). Earlier unused tokens stay valid until expiry."""
    if not 60 <= ttl_s <= 7 * 86400:
        raise ValidationFailed("ttl_s must be between 60 and 604800 seconds.", errors={"ttl_s": ["out of range"]})
    prefix, secret, clear = _issue()
    with transaction.atomic():
        token = EnrollmentToken.objects.create(host=host, prefix=prefix, secret_hash=_hash(secret),
                                               expires_at=now() + timedelta(seconds=ttl_s), created_by=actor)
        audit_record(actor=actor, action="inventory.agent.enrollment_token_create", target=host,
                     after={"token_prefix": prefix, "expires_at": token.expires_at})
    return token, clear


def agent_enroll(*, token: str, inventory: dict, agent_version: str = "") -> tuple[AgentCredential, str]:
    """Spend an enrollment token: sync inventory, return (credential, clear secret). An `enrolling` host becomes
    available now when `HOST_ACCEPTANCE_CHECK` is off; with it on (the default) it stays `enrolling` until the
    acceptance check passes (apps.health, docs/health.md "Repair").

    Raises ValidationFailed (`enrollment_token_invalid`) for an unknown, spent or expired token.
    """
    prefix, secret = _split(token)
    with transaction.atomic():
        row = EnrollmentToken.objects.select_for_update().select_related("host").filter(prefix=prefix).first()
        if (row is None or row.used_at is not None or row.expires_at <= now()
                or not hmac.compare_digest(row.secret_hash, _hash(secret))):
            raise ValidationFailed("The enrollment token is unknown, spent or expired.",
                                   code=Code.ENROLLMENT_TOKEN_INVALID)
        row.used_at = now()
        row.save(update_fields=["used_at"])
        host = Host.objects.select_for_update().get(pk=row.host_id)
        active = AgentCredential.objects.filter(host=host, revoked_at__isnull=True)
        _credential_cache_forget(list(active.values_list("prefix", flat=True)))
        active.update(revoked_at=now())
        cprefix, csecret, clear = _issue()
        credential = AgentCredential.objects.create(host=host, prefix=cprefix, secret_hash=_hash(csecret),
                                                    last_seen_at=now())
        host_inventory_sync(host=host, inventory=inventory or {}, agent_version=agent_version)
        if host.state == HostState.ENROLLING and getattr(settings, "HOST_ACCEPTANCE_CHECK", True):
            # stays out of placement until it passed the acceptance check (apps.health completes the enrollment)
            Host.objects.filter(pk=host.pk).update(state_reason="agent enrolled; acceptance check pending")
        elif host.state == HostState.ENROLLING:
            transition(host, "enroll_complete", HOST_TRANSITIONS, field="state",
                       extra={"state_reason": "agent enrolled", "state_changed_at": now()})
        audit_record(actor=None, action="inventory.agent.enroll", target=host,
                     after={"credential_prefix": cprefix, "agent_version": agent_version})
    return credential, clear


_CACHED_FIELDS = ("id", "host_id", "prefix", "secret_hash")


def _credential_cache_key(prefix: str) -> str:
    return f"gpucloud:agent-credential:{prefix}"


def _credential_cache_forget(prefixes: list[str]) -> None:
    """Drop the cached rows of credentials being revoked, once the revoking transaction commits (before it, a
    request could cache the still-active row again). Redis unavailable: logged; the entries expire by their TTL."""
    if not prefixes:
        return

    def forget() -> None:
        try:
            last_seen.redis_client().delete(*[_credential_cache_key(p) for p in prefixes])
        except redis.RedisError as exc:
            log.warning("agent_credential_cache_forget_failed", extra={"error": str(exc)})

    transaction.on_commit(forget)


def agent_authenticate(token: str) -> AgentCredential | None:
    """The active credential for `<prefix>.<secret>`, or None.

    The credential's id, host id and secret hash are cached in Redis per prefix for
    `AGENT_CREDENTIAL_CACHE_SECONDS` (30 s), so a heartbeat reads no credential row; the secret is checked against
    the hash on every request. The returned row has only id, host_id, prefix and secret_hash loaded (the others
    load on access; `credential.host` is a query). A revoke (re-enrollment) deletes the entry when it commits; a
    request that read the row during the revoking transaction can cache it again, so a revoked credential is
    refused at the latest after the TTL. When Redis cannot be reached the row is read from the database."""
    prefix, secret = _split(token)
    if not prefix or not secret:
        return None
    key, ttl = _credential_cache_key(prefix), settings.AGENT_CREDENTIAL_CACHE_SECONDS
    values = None
    try:
        hit = last_seen.redis_client().get(key) if ttl > 0 else None
        if hit is not None:
            cred_id, host_id, secret_hash = hit.decode().split()
            values = (uuid.UUID(cred_id), uuid.UUID(host_id), prefix, secret_hash)
    except redis.RedisError as exc:  # Redis down or slow: authenticate from the database
        log.warning("agent_credential_cache_failed", extra={"error": str(exc)})
        ttl = 0
    if values is None:
        values = (AgentCredential.objects.filter(prefix=prefix, revoked_at__isnull=True)
                  .values_list(*_CACHED_FIELDS).first())
        if values is None:
            return None
        if ttl > 0:
            try:
                last_seen.redis_client().set(key, f"{values[0]} {values[1]} {values[3]}", ex=ttl)
            except redis.RedisError as exc:
                log.warning("agent_credential_cache_failed", extra={"error": str(exc)})
    if not hmac.compare_digest(values[3], _hash(secret)):
        return None
    return AgentCredential.from_db(DEFAULT_DB_ALIAS, list(_CACHED_FIELDS), list(values))


def _host_with_pending(host_id) -> Host | None:
    """The host's id, name, state and agent version (other fields load on access) with `pending_commands`, how many
    of its commands await a result; None when there is no such host. One statement, written out: the ORM's
    building of the same subquery cost a heartbeat more CPU than everything else it does."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT h.id, h.name, h.state, h.agent_version, (SELECT count(*) FROM {AgentCommand._meta.db_table} c"
            " WHERE c.host_id = h.id AND c.status IN (%s, %s))"
            f" FROM {Host._meta.db_table} h WHERE h.id = %s",
            [CommandStatus.QUEUED.value, CommandStatus.DISPATCHED.value, host_id],
        )
        row = cur.fetchone()
    if row is None:
        return None
    host = Host.from_db(DEFAULT_DB_ALIAS, ["id", "name", "state", "agent_version"], list(row[:4]))
    host.pending_commands = row[4]
    return host


def agent_heartbeat(*, credential: AgentCredential, inventory: dict | None = None,
                    agent_version: str = "") -> Host | None:
    """Record a heartbeat; when `inventory` is given, sync it too. Returns the host with `pending_commands` (how
    many commands await a result) set, or None when the host no longer exists.

    A heartbeat that changes nothing writes no row and reads one (the host's name, state, version and pending
    command count): the time it was seen goes to the batched last-seen record (`last_seen`, flushed by beat), and
    an inventory sync writes only what differs from the records. Only when Redis is unavailable does the
    heartbeat write the last-seen times itself."""
    at = now()
    batched = last_seen.record(credential_id=credential.pk, host_id=credential.host_id, at=at)
    host = _host_with_pending(credential.host_id)
    if host is None:
        return None
    if batched and not inventory and (not agent_version or agent_version == host.agent_version):
        return host
    with transaction.atomic():
        host = Host.objects.select_for_update().get(pk=credential.host_id)
        if not batched:
            AgentCredential.objects.filter(pk=credential.pk).update(last_seen_at=at)
        if inventory:
            host_inventory_sync(host=host, inventory=inventory, agent_version=agent_version,
                                seen_at=None if batched else at)
        else:
            fields = [] if batched else ["last_heartbeat_at"]
            host.last_heartbeat_at = host.last_heartbeat_at if batched else at
            if agent_version and agent_version != host.agent_version:
                host.agent_version = agent_version
                fields.append("agent_version")
            host.save(update_fields=fields)
    host.pending_commands = host.agent_commands.filter(
        status__in=[CommandStatus.QUEUED, CommandStatus.DISPATCHED]).count()  # an inventory sync may queue some
    return host


# --- inventory sync -------------------------------------------------------------------------------------------
_GPU_OBSERVED = ("name", "memory_mib", "pcie", "ecc", "nvlink", "mig", "module_id", "driver_version")
# mig: {enabled, layout}; vfs: [{index, pci_address}] (SR-IOV VFs the kernel created)
_GPU_KEPT = ("mig_drift",)  # written by the MIG drift reconciler (services.mig_drift), not by the report


_HOST_SYNCED = ("cpu_sockets", "cpu_cores", "cpu_threads", "memory_mib", "numa_nodes", "driver_version",
                "last_heartbeat_at", "agent_version", "observed", "active_partitions")
_UNSET = object()


def host_inventory_sync(*, host: Host, inventory: dict, agent_version: str = "",
                        seen_at: dt.datetime | None | object = _UNSET) -> None:
    """Make the host's GPUs, MIG layouts and HCA port GUIDs match what the agent reports.

    `inventory` shape (agent/gpucloud_agent/inventory.py): {"host": {cpu_sockets, cpu_cores, cpu_threads,
    memory_mib, numa_nodes, driver_version}, "gpus": [{index, uuid, serial, model, pci_address, numa_node,
    mig: {enabled, layout: [{profile_id, start, size}]}, ...}], "hca_ports": [{device, port_number, port_guid,
    lid, rate_gbps, pci_address, vfs: [{index, pci_address}]}]}. GPUs unknown to the inventory are created; HCA
    ports are matched by device/port and only updated (their fabric and cabling come from the fleet file); their
    SR-IOV VFs are recorded as `VirtualFunction` rows of the port, as a GPU's are. A GPU with no recorded MIG layout adopts the
    reported one; a GPU whose recorded layout differs from the reported one (e.g. after a reboot) keeps the record,
    is flagged `observed.mig_restore_pending` and gets an `apply_mig_layout` command to restore it. Raises Conflict
    when a reported GPU UUID belongs to another host.

    `seen_at` becomes `last_heartbeat_at` (default now; None leaves it to the batched last-seen record). Only
    rows and fields whose values differ are written: an unchanged report writes nothing.
    """
    before = {f: getattr(host, f) for f in _HOST_SYNCED}
    facts = inventory.get("host") or {}
    for attr in ("cpu_sockets", "cpu_cores", "cpu_threads", "memory_mib", "numa_nodes", "driver_version"):
        if facts.get(attr) not in (None, ""):
            setattr(host, attr, facts[attr])
    if seen_at is not None:
        host.last_heartbeat_at = now() if seen_at is _UNSET else seen_at
    host.agent_version = agent_version or host.agent_version
    before_boot = ((host.observed or {}).get("host") or {}).get("boot_id")
    rebooted = bool(before_boot and facts.get("boot_id") and facts["boot_id"] != before_boot)
    reboot = (host.observed or {}).get("reboot")
    if rebooted:
        reboot = {"boot_id": facts["boot_id"], "previous_boot_id": before_boot,
                  "booted_at": facts.get("booted_at") or now().isoformat(), "seen_at": now().isoformat()}
    host.observed = {"host": facts, "hca_ports": inventory.get("hca_ports", []),
                     "nvswitch": inventory.get("nvswitch", {}), **({"reboot": reboot} if reboot else {})}
    if "active_partitions" in (inventory.get("nvswitch") or {}):
        host.active_partitions = sorted(inventory["nvswitch"]["active_partitions"])
    changed = [f for f in _HOST_SYNCED if getattr(host, f) != before[f]]
    if changed:
        host.save(update_fields=changed)
    # a reboot whose restore has not reported yet: the VFs the kernel no longer lists are kept (the restore
    # enables them again from the recorded ones), on GPUs and HCA ports alike
    restoring = rebooted or bool(reboot and reboot["boot_id"] == facts.get("boot_id")
                                 and not reboot.get("restored_at"))
    for g in inventory.get("gpus", []):
        _gpu_sync(host, g, rebooted=restoring)
    for p in inventory.get("hca_ports", []):
        _hca_port_sync(host, p, rebooted=restoring)
    if rebooted:
        audit_record(actor=None, action="inventory.host.rebooted", target=host, after=reboot)


def _hca_port_sync(host: Host, p: dict, rebooted: bool = False) -> None:
    """Update the recorded port (matched by device/port) with the reported GUID, LID and rate.

    Raises Conflict `hca_port_guid_conflict` (409) when the GUID is recorded on another port: the fleet file
    and the host disagree, and an operator must decide which is right (nothing is overwritten)."""
    port_number = p.get("port_number", 1)
    clash = (HcaPort.objects.filter(port_guid=p["port_guid"])
             .exclude(host=host, device=p["device"], port_number=port_number)
             .values_list("host__name", "device", "port_number").first())
    if clash:
        raise Conflict(f"HCA port GUID {p['port_guid']} reported for {p['device']}/{port_number} is already "
                       f"recorded on {clash[0]} {clash[1]}/{clash[2]}.", code="hca_port_guid_conflict")
    values = {"port_guid": p["port_guid"], "lid": p.get("lid"), "rate_gbps": p.get("rate_gbps") or 0}
    if p.get("pci_address"):
        values["pci_address"] = p["pci_address"]
    (HcaPort.objects.filter(host=host, device=p["device"], port_number=port_number).exclude(**values)
     .update(**values, updated_at=now()))
    if "vfs" in p:
        port = HcaPort.objects.filter(host=host, device=p["device"], port_number=port_number).first()
        if port is not None:
            _vfs_sync(p["vfs"], keep=rebooted, hca_port=port)


def _gpu_sync(host: Host, g: dict, rebooted: bool = False) -> None:
    clash = Gpu.objects.filter(uuid=g["uuid"]).exclude(host=host).values_list("host__name", flat=True).first()
    if clash:
        raise Conflict(f"GPU {g['uuid']} is already recorded on host {clash}.", code="gpu_uuid_conflict")
    gpu = Gpu.objects.filter(host=host, index=g["index"]).first() or Gpu(host=host, index=g["index"])
    before = None if gpu.pk is None else (gpu.uuid, gpu.serial, gpu.model, gpu.pci_address, gpu.numa_node,
                                          gpu.mode, dict(gpu.observed or {}))
    gpu.uuid, gpu.serial = g["uuid"], g.get("serial") or g["uuid"]
    gpu.model = g.get("model") or gpu.model
    gpu.pci_address, gpu.numa_node = g.get("pci_address", gpu.pci_address), g.get("numa_node", gpu.numa_node)
    kept = {k: gpu.observed[k] for k in _GPU_KEPT if k in (gpu.observed or {})}
    gpu.observed = {**{k: g[k] for k in _GPU_OBSERVED if k in g}, **kept}
    mig = g.get("mig") or {}
    recorded = {(gi.profile_id, gi.start) for gi in gpu.gpu_instances.all()} if gpu.pk else set()
    if mig.get("enabled"):
        gpu.mode = GpuMode.MIG
    elif gpu.mode == GpuMode.MIG and not recorded:
        gpu.mode = GpuMode.EXCLUSIVE
    observed = {(i["profile_id"], i["start"]) for i in mig.get("layout") or []}
    drift = bool(recorded) and "layout" in mig and observed != recorded
    gpu.observed["mig_restore_pending"] = drift
    if "vfs" in g:
        gpu.observed["vf_count"] = len({v["index"] for v in g["vfs"]})
    if before != (gpu.uuid, gpu.serial, gpu.model, gpu.pci_address, gpu.numa_node, gpu.mode, gpu.observed):
        gpu.save()
    if "vfs" in g:
        _vfs_sync(g["vfs"], keep=rebooted, gpu=gpu)
    if "layout" in mig and not recorded:
        _layout_replace(gpu, mig.get("layout") or [])  # nothing recorded yet: adopt what the host has
    elif drift:
        _mig_restore(host, gpu)


def _vfs_sync(vfs: list[dict], keep: bool = False, **parent) -> None:
    """Record the SR-IOV VFs of one parent (`gpu=` a GPU, or `hca_port=` an HCA port's physical function) as the
    kernel reports them; VFs that vanished are dropped unless (`keep`) the host rebooted and its VFs have not been
    enabled again yet: the recorded ones are what the restore after the reboot enables (compute's
    `restore_devices`). `observed.vf_count` is the real count (RW-015/RW-017: never the count a tool claims)."""
    reported = {v["index"]: v.get("pci_address", "") for v in vfs}
    existing = {vf.index: vf for vf in VirtualFunction.objects.filter(**parent)}
    for index, pci in reported.items():
        vf = existing.get(index)
        if vf is None:
            VirtualFunction.objects.create(index=index, pci_address=pci, **parent)
        elif vf.pci_address != pci:
            vf.pci_address = pci
            vf.save(update_fields=["pci_address"])
    if not keep:
        VirtualFunction.objects.filter(**parent).exclude(index__in=list(reported)).delete()


def _mig_restore(host: Host, gpu: Gpu) -> None:
    """The host lost or changed the recorded MIG geometry (MIG GPU instances do not survive a reboot, MIG User
    Guide): queue the recorded layout again, unless a layout change for this GPU is already pending (RW-009)."""
    pending = AgentCommand.objects.filter(host=host, gpu=gpu, kind=CommandKind.APPLY_MIG_LAYOUT,
                                          status__in=[CommandStatus.QUEUED, CommandStatus.DISPATCHED]).exists()
    if pending:
        return
    layout = [{"profile": gi.profile_id, "start": gi.start} for gi in gpu.gpu_instances.order_by("start")]
    agent_command_enqueue(actor=None, host=host, kind=CommandKind.APPLY_MIG_LAYOUT,
                          payload={"gpu_index": gpu.index, "layout": layout}, ledger_guard=False)


def _layout_replace(gpu: Gpu, layout: list[dict]) -> None:
    spec = gpu_model_get(gpu.model)
    by_id = {p.id: p for p in spec.mig.profiles} if spec and spec.mig else {}
    GpuInstance.objects.filter(gpu=gpu).delete()
    GpuInstance.objects.bulk_create([
        GpuInstance(gpu=gpu, profile_id=i["profile_id"], start=i["start"],
                    profile=by_id[i["profile_id"]].name if i["profile_id"] in by_id else str(i["profile_id"]),
                    size=i.get("size") or (by_id[i["profile_id"]].memory if i["profile_id"] in by_id else 1),
                    gi_id=i.get("gi_id")) for i in layout])


# --- commands ------------------------------------------------------------------------------------------------
def _gpu(host: Host, payload: dict) -> Gpu:
    index = payload.get("gpu_index")
    gpu = Gpu.objects.filter(host=host, index=index).first() if isinstance(index, int) else None
    if gpu is None:
        raise GpuNotFound(f"Host {host.name} has no GPU with index {index!r}.")
    return gpu


def _mig_spec(gpu: Gpu):
    spec = gpu_model_get(gpu.model)
    if spec is None or spec.mig is None:
        raise MigLayoutRejected(f"{gpu.model} does not support MIG.", code=Code.MIG_LAYOUT_REJECTED,
                                rejections=[{"code": "mig_unsupported", "message": f"{gpu.model} has no MIG"}])
    return spec.mig


def _reject(plan) -> MigLayoutRejected:
    return MigLayoutRejected(plan.explain(), rejections=[r.as_dict() for r in plan.rejections])


def _current_layout(gpu: Gpu) -> list[tuple[int, int]]:
    return [(gi.profile_id, gi.start) for gi in gpu.gpu_instances.all()]


def _validate_mig_apply(host: Host, payload: dict) -> dict:
    gpu = _gpu(host, payload)
    spec = _mig_spec(gpu)
    items = payload.get("layout")
    if not isinstance(items, list):
        raise ValidationFailed("layout must be a list of {profile, start?}.", code=Code.COMMAND_INVALID)
    plan = mig_plan(spec, [(i.get("profile", i.get("profile_id")), i.get("start")) if isinstance(i, dict) else i
                           for i in items], driver_version=host.driver_version or None)
    if not plan.ok:
        raise _reject(plan)
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid, "layout": [p.as_dict() for p in plan.layout]}


def _validate_gi_create(host: Host, payload: dict) -> dict:
    gpu = _gpu(host, payload)
    spec = _mig_spec(gpu)
    if gpu.mode != GpuMode.MIG:
        raise ValidationFailed(f"GPU {gpu.index} is not in MIG mode.", code=Code.MIG_NOT_ENABLED)
    plan = mig_plan(spec, [(payload.get("profile"), payload.get("start"))], current=_current_layout(gpu),
                    driver_version=host.driver_version or None)
    if not plan.ok:
        raise _reject(plan)
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid, **plan.placements[0].as_dict()}


def _validate_gi_destroy(host: Host, payload: dict) -> dict:
    gpu = _gpu(host, payload)
    gi = gpu.gpu_instances.filter(start=payload.get("start")).first()
    if gi is None:
        raise NotFound(f"GPU {gpu.index} has no GPU instance at start slice {payload.get('start')!r}.",
                       code=Code.GPU_INSTANCE_NOT_FOUND)
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid, "profile_id": gi.profile_id, "start": gi.start,
            "size": gi.size}


def _validate_reset(host: Host, payload: dict) -> dict:
    gpu = _gpu(host, payload)
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid}


def _validate_reset_vf(host: Host, payload: dict) -> dict:
    gpu = _gpu(host, payload)
    vf = VirtualFunction.objects.filter(gpu=gpu, pci_address=payload.get("vf_address") or "").first()
    if vf is None:
        raise ValidationFailed(f"GPU {gpu.index} has no SR-IOV VF {payload.get('vf_address')!r}.",
                               code=Code.COMMAND_INVALID, errors={"vf_address": ["not a VF of this GPU"]})
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid, "vf_address": vf.pci_address}


def _validate_set_vf_type(host: Host, payload: dict) -> dict:
    """An SR-IOV VF of the GPU in inventory, on a model whose catalog backs vGPUs with VFs, and a vGPU type of that
    model (time-sliced or MIG-backed)."""
    gpu = _gpu(host, payload)
    spec = gpu_model_get(gpu.model)
    if spec is None or spec.vgpu_backing != "sriov_vf":
        raise ValidationFailed(f"{gpu.model} does not hand vGPUs out on SR-IOV VFs.", code=Code.COMMAND_INVALID,
                               errors={"gpu_index": ["no SR-IOV vGPU"]})
    vgpu_type = payload.get("vgpu_type")
    if vgpu_type not in {t.name for t in spec.vgpu_types}:
        raise ValidationFailed(f"{gpu.model} has no vGPU type {vgpu_type!r}.", code=Code.COMMAND_INVALID,
                               errors={"vgpu_type": ["not a vGPU type of this GPU model"]})
    vf = VirtualFunction.objects.filter(gpu=gpu, pci_address=payload.get("vf_address") or "").first()
    if vf is None:
        raise ValidationFailed(f"GPU {gpu.index} has no SR-IOV VF {payload.get('vf_address')!r}.",
                               code=Code.COMMAND_INVALID, errors={"vf_address": ["not a VF of this GPU"]})
    return {"gpu_index": gpu.index, "gpu_uuid": gpu.uuid, "vf_address": vf.pci_address, "vgpu_type": vgpu_type}


def _validate_set_hca_vf_guid(host: Host, payload: dict) -> dict:
    """``{"device", "vf_index", "guid"}``: an SR-IOV VF of one of the host's HCA ports in inventory, and a GUID
    (0x-prefixed, up to 64 bits; ``0x0`` clears the VF). Normalised with the VF's PCI address."""
    vf = (VirtualFunction.objects.filter(hca_port__host=host, hca_port__device=payload.get("device") or "",
                                         index=payload.get("vf_index") if isinstance(payload.get("vf_index"), int)
                                         else -1).first())
    if vf is None:
        raise ValidationFailed(f"Host {host.name} has no SR-IOV VF {payload.get('vf_index')!r} of HCA "
                               f"{payload.get('device')!r}.", code=Code.COMMAND_INVALID,
                               errors={"vf_index": ["not a VF of this HCA in inventory"]})
    try:
        guid = int(str(payload.get("guid") or ""), 16)
        if not 0 <= guid < 2**64:
            raise ValueError
    except ValueError:
        raise ValidationFailed("guid must be a 0x-prefixed 64-bit GUID.", code=Code.COMMAND_INVALID,
                               errors={"guid": ["a 0x-prefixed 64-bit GUID"]})
    return {"device": payload["device"], "vf_index": vf.index, "vf_address": vf.pci_address,
            "guid": f"0x{guid:016x}" if guid else "0x0"}


def host_nvswitch_system(host: Host) -> str:
    if host.nvswitch_system:
        return host.nvswitch_system
    model = host.gpus.values_list("model", flat=True).first()
    spec = gpu_model_get(model) if model else None
    return spec.nvswitch_system if spec else ""


def _partition(host: Host, payload: dict) -> dict:
    pid = payload.get("partition_id")
    for p in nvswitch_partitions(host_nvswitch_system(host)):
        if p["id"] == pid:
            return p
    raise ValidationFailed(f"Host {host.name} has no NVSwitch partition {pid!r}.", code=Code.PARTITION_UNKNOWN)


def _validate_activate(host: Host, payload: dict) -> dict:
    part = _partition(host, payload)
    partitions = {p["id"]: p for p in nvswitch_partitions(host_nvswitch_system(host))}
    for active in host.active_partitions:
        shared = sorted(set(part["gpus"]) & set(partitions.get(active, {}).get("gpus", [])))
        if active != part["id"] and shared:
            raise PartitionConflict(f"Partition {part['id']} shares GPUs {shared} with active partition {active}.",
                                    active_partition=active, gpus=shared)
    return {"partition_id": part["id"], "gpus": part["gpus"]}


def _validate_deactivate(host: Host, payload: dict) -> dict:
    part = _partition(host, payload)
    if part["id"] not in host.active_partitions:
        raise ValidationFailed(f"Partition {part['id']} is not active.", code=Code.PARTITION_NOT_ACTIVE)
    return {"partition_id": part["id"], "gpus": part["gpus"]}


def _validate_reboot(host: Host, payload: dict) -> dict:
    return {}


def _validate_restore(host: Host, payload: dict) -> dict:
    """``{"boot_id", "sriov": [{"pci_address", "num_vfs"}], "vfio": [{"pci_address"}]}``: the boot it restores
    for, and PCI addresses of the host's own devices (a GPU or an HCA port with that address)."""
    known = set(Gpu.objects.filter(host=host).values_list("pci_address", flat=True)) | set(
        HcaPort.objects.filter(host=host).exclude(pci_address="").values_list("pci_address", flat=True))
    out: dict = {"boot_id": str(payload.get("boot_id") or ""), "sriov": [], "vfio": []}
    for key in ("sriov", "vfio"):
        for item in payload.get(key) or []:
            if not isinstance(item, dict) or item.get("pci_address") not in known:
                raise ValidationFailed(f"{key}: {item!r} is not a device of {host.name}.", code=Code.COMMAND_INVALID,
                                       errors={key: ["not a PCI address of this host's GPUs or HCA ports"]})
            entry = {"pci_address": item["pci_address"]}
            if key == "sriov":
                if not isinstance(item.get("num_vfs"), int) or not 0 < item["num_vfs"] <= 256:
                    raise ValidationFailed("num_vfs must be 1..256.", code=Code.COMMAND_INVALID,
                                           errors={"num_vfs": ["1..256"]})
                entry["num_vfs"] = item["num_vfs"]
            out[key].append(entry)
    return out


def _validate_diagnostics(host: Host, payload: dict) -> dict:
    """``{"gpu_indexes": [...] (empty: every GPU), "level": 1..4}`` (DCGM's run levels; the validation command
    ignores it)."""
    indexes = payload.get("gpu_indexes") or []
    if not isinstance(indexes, list) or any(not isinstance(i, int) for i in indexes):
        raise ValidationFailed("gpu_indexes must be a list of GPU indexes.", code=Code.COMMAND_INVALID,
                               errors={"gpu_indexes": ["a list of integers"]})
    known = set(Gpu.objects.filter(host=host).values_list("index", flat=True))
    if set(indexes) - known:
        raise ValidationFailed(f"Host {host.name} has no GPU {sorted(set(indexes) - known)}.",
                               code=Code.COMMAND_INVALID, errors={"gpu_indexes": ["unknown GPU"]})
    level = payload.get("level", 2)
    if level not in (1, 2, 3, 4):
        raise ValidationFailed("level must be 1, 2, 3 or 4.", code=Code.COMMAND_INVALID, errors={"level": ["1-4"]})
    return {"gpu_indexes": sorted(indexes), "level": level}


VALIDATORS = {
    CommandKind.APPLY_MIG_LAYOUT: _validate_mig_apply, CommandKind.CREATE_GPU_INSTANCE: _validate_gi_create,
    CommandKind.DESTROY_GPU_INSTANCE: _validate_gi_destroy, CommandKind.RESET_GPU: _validate_reset,
    CommandKind.RESET_VF: _validate_reset_vf, CommandKind.SET_VF_VGPU_TYPE: _validate_set_vf_type,
    CommandKind.SET_HCA_VF_GUID: _validate_set_hca_vf_guid,
    CommandKind.ACTIVATE_PARTITION: _validate_activate, CommandKind.DEACTIVATE_PARTITION: _validate_deactivate,
    CommandKind.REBOOT_HOST: _validate_reboot, CommandKind.RUN_DIAGNOSTICS: _validate_diagnostics,
    CommandKind.RESTORE_DEVICES: _validate_restore,
}


#: The commands that change a GPU's slicing or mode, or take it from a VM (a reset), and the memory slices each
#: touches (None: the whole GPU).
GUARDED = {
    CommandKind.APPLY_MIG_LAYOUT: lambda p: None,
    CommandKind.CREATE_GPU_INSTANCE: lambda p: (p["start"], p["start"] + p["size"]),
    CommandKind.DESTROY_GPU_INSTANCE: lambda p: (p["start"], p["start"] + p["size"]),
    CommandKind.RESET_GPU: lambda p: None,
}
#: The commands that change an NVSwitch partition's NVLink between its GPUs (guarded on each of them): a
#: deactivation takes it from them, an activation resets the GPUs (Fabric Manager) and links them to the others.
GUARDED_PARTITIONS = (CommandKind.ACTIVATE_PARTITION, CommandKind.DEACTIVATE_PARTITION)
#: The commands on one SR-IOV VF (payload `vf_address`), refused while an instance holds the VF.
GUARDED_VFS = (CommandKind.RESET_VF, CommandKind.SET_VF_VGPU_TYPE, CommandKind.SET_HCA_VF_GUID)
#: Guarded against running work only (allocations whose period has begun): they harm no lease that starts later.
GUARDED_STARTED_ONLY = (CommandKind.RESET_GPU, CommandKind.DEACTIVATE_PARTITION)


def agent_command_enqueue(*, actor, host: Host, kind: str, payload: dict, ledger_guard: bool = True) -> AgentCommand:
    """Validate and queue a command for the host's agent; the payload stored is the normalised, planned one.

    With `ledger_guard` (the default, and always for staff), a command of `GUARDED` is refused while an allocation
    in the ledger holds the GPU (a MIG layout or mode change, a GPU reset: any allocation; a GPU instance's create
    or destroy: one on its memory slices), a command on an SR-IOV VF (`GUARDED_VFS`) while an instance holds the
    VF (409 `vf_allocated`), and a partition activation or deactivation while one holds any of its GPUs, read
    under the host's ledger lock in the command's transaction (ADR 0503). The platform's own steps on devices
    they hold pass `ledger_guard=False`: compute creating the GPU instance its claim placed and deactivating its
    stopped VM's partition, the scrub's destroy and resets of a released tenant's devices, the restore of a
    recorded layout after a reboot.

    Raises MigLayoutRejected (400, `rejections`), GpuNotFound (404), PartitionConflict (409), GpuAllocated (409
    `gpu_allocated`, `holders`), ValidationFailed.
    """
    if kind not in VALIDATORS:
        raise ValidationFailed(f"Unknown command kind {kind!r}.", code=Code.COMMAND_INVALID)
    normalised = VALIDATORS[kind](host, payload or {})
    with transaction.atomic():
        gpu = Gpu.objects.filter(host=host, index=normalised.get("gpu_index")).first() \
            if "gpu_index" in normalised else None
        if ledger_guard and kind in GUARDED and gpu is not None:
            gpu_guard_free(gpu, action=f"{kind} on GPU {gpu.index}", slices=GUARDED[kind](normalised),
                           started_only=kind in GUARDED_STARTED_ONLY)
        if ledger_guard and kind in GUARDED_VFS:
            vf_guard_free(host, normalised["vf_address"], action=f"{kind} on VF {normalised['vf_address']}")
        if ledger_guard and kind in GUARDED_PARTITIONS:  # physical GPU id = index + 1
            for g in Gpu.objects.filter(host=host, index__in=[p - 1 for p in normalised["gpus"]]).order_by("index"):
                gpu_guard_free(g, action=f"{kind} {normalised['partition_id']}",
                               started_only=kind in GUARDED_STARTED_ONLY)
        cmd = AgentCommand.objects.create(host=host, gpu=gpu, kind=kind, payload=normalised, created_by=actor)
        audit_record(actor=actor, action=f"inventory.agent.command.{kind}", target=host,
                     after={"command_id": cmd.id, **normalised})
    return cmd


def agent_commands_pull(*, credential: AgentCredential, limit: int = 20) -> list[AgentCommand]:
    """Commands not yet reported, oldest first; marks queued ones dispatched. Re-sent until a result arrives.

    With nothing newly queued this is one read and no transaction."""
    awaiting = [CommandStatus.QUEUED, CommandStatus.DISPATCHED]
    cmds = list(AgentCommand.objects.filter(host_id=credential.host_id, status__in=awaiting)
                .order_by("created_at")[:limit])
    if not any(c.status == CommandStatus.QUEUED for c in cmds):
        return cmds
    with transaction.atomic():
        cmds = list(AgentCommand.objects.select_for_update().filter(
            host_id=credential.host_id, status__in=awaiting).order_by("created_at")[:limit])
        at = now()
        fresh = [c.pk for c in cmds if c.status == CommandStatus.QUEUED]
        AgentCommand.objects.filter(pk__in=fresh).update(status=CommandStatus.DISPATCHED, dispatched_at=at,
                                                          updated_at=at)
        for c in cmds:
            if c.pk in fresh:
                c.status, c.dispatched_at = CommandStatus.DISPATCHED, at
    return cmds


def agent_command_report(*, credential: AgentCredential, command_id, succeeded: bool, result: dict | None = None,
                         error: str = "") -> AgentCommand:
    """Record a command's outcome and apply the reported state. A second report of the same id changes nothing."""
    with transaction.atomic():
        cmd = AgentCommand.objects.select_for_update().filter(pk=command_id, host_id=credential.host_id).first()
        if cmd is None:
            raise NotFound("No such command for this host.", code=Code.COMMAND_NOT_FOUND)
        if cmd.status in (CommandStatus.SUCCEEDED, CommandStatus.FAILED):
            return cmd
        result = result or {}
        if succeeded and cmd.kind == CommandKind.APPLY_MIG_LAYOUT:
            mismatch = _mig_readback_mismatch(cmd, result)
            if mismatch:
                succeeded, error, result = False, mismatch, {**result, "code": Code.MIG_LAYOUT_MISMATCH}
        cmd.status = CommandStatus.SUCCEEDED if succeeded else CommandStatus.FAILED
        cmd.result, cmd.error, cmd.completed_at = result, (error or "")[:500], now()
        cmd.save(update_fields=["status", "result", "error", "completed_at"])
        if succeeded:
            _apply_result(cmd, result)
        elif cmd.kind == CommandKind.APPLY_MIG_LAYOUT:
            _mig_apply_failed(cmd, result)
        if cmd.kind == CommandKind.RESTORE_DEVICES:
            _restore_reported(cmd, result)
        gpu_scrub_progress(cmd)
        audit_record(actor=None, action="inventory.agent.command_report", target=cmd.host,
                     after={"command_id": cmd.id, "kind": cmd.kind, "status": cmd.status, "error": cmd.error})
    return cmd


def _pairs(layout) -> set[tuple[int, int]]:
    return {(int(i["profile_id"]), int(i["start"])) for i in layout or []}


def _mig_readback_mismatch(cmd: AgentCommand, result: dict) -> str:
    """'' when the layout the agent read back after an apply is the one asked; else why not (the apply is then
    recorded as failed: a success the control plane cannot verify is not one)."""
    if not isinstance(result.get("layout"), list):
        return "mig_layout_mismatch: the agent reported no layout read back after the apply"
    asked, got = _pairs(cmd.payload.get("layout")), _pairs(result["layout"])
    if asked == got:
        return ""
    label = lambda pairs: ", ".join(f"{p}@{s}" for p, s in sorted(pairs, key=lambda t: t[1])) or "none"  # noqa: E731
    return f"mig_layout_mismatch: GPU {cmd.payload.get('gpu_index')} reads back [{label(got)}], not [{label(asked)}]"


def _mig_apply_failed(cmd: AgentCommand, result: dict) -> None:
    """A failed apply keeps the recorded (previous) layout: placement goes on seeing it. When the host does not
    have it (the agent's rollback failed, or it reported success with another layout), the GPU is flagged
    `observed.mig_restore_pending` and the previous layout is queued again, as after a reboot."""
    gpu = Gpu.objects.filter(host_id=cmd.host_id, index=cmd.payload.get("gpu_index")).first()
    if gpu is None:
        return
    recorded = {(gi.profile_id, gi.start) for gi in gpu.gpu_instances.all()}
    reported = result.get("layout")
    if result.get("rolled_back") is True and isinstance(reported, list) and _pairs(reported) == recorded:
        return
    gpu.observed = {**gpu.observed, "mig_restore_pending": True}
    gpu.save(update_fields=["observed", "updated_at"])
    if _pairs(cmd.payload.get("layout")) != recorded:  # a failed restore is not queued again here (no loop): the
        _mig_restore(gpu.host, gpu)                     # next inventory report retries it


#: Called in the report's transaction for each GPU that did not come back after its host rebooted:
#: ``fn(*, host, gpu_index, boot_id, message)``. apps.health registers one (a `device_op_failed` event).
_DEVICE_MISSING_HOOKS: list = []


def register_device_missing_hook(fn) -> None:
    if fn not in _DEVICE_MISSING_HOOKS:
        _DEVICE_MISSING_HOOKS.append(fn)


def _gpus_missing(host: Host, reboot: dict) -> None:
    """Tell the hooks about each GPU of the host among the devices that did not come back. A hook that fails is
    logged and undone (its savepoint): the report is recorded regardless."""
    by_pci = dict(Gpu.objects.filter(host=host).values_list("pci_address", "index"))
    for m in reboot["missing"]:
        index = by_pci.get(m.get("pci_address"))
        for fn in _DEVICE_MISSING_HOOKS if index is not None else []:
            try:
                with transaction.atomic():
                    fn(host=host, gpu_index=index, boot_id=reboot["boot_id"],
                       message=f"GPU {index} ({m['pci_address']}) did not come back after the host rebooted: "
                               f"{m.get('code', '')} {m.get('error', '')}".strip())
            except Exception:  # noqa: BLE001 - a hook must not lose the agent's report
                log.exception("device_missing_hook_failed", extra={"host": host.name, "gpu_index": index})


def _restore_reported(cmd: AgentCommand, result: dict) -> None:
    """The restore after a reboot finished: the host's reboot record (`observed.reboot`) gets `restored_at` and
    the devices that did not come back (`missing`: [{pci_address, step, code, error}]), each missing GPU goes to
    the registered hooks (`register_device_missing_hook`); from now on VFs the agent does not report are dropped
    again."""
    host = Host.objects.select_for_update().get(pk=cmd.host_id)
    reboot = dict((host.observed or {}).get("reboot") or {})
    if reboot.get("boot_id") != cmd.payload.get("boot_id"):
        return  # the host rebooted again since: the newer record waits for its own restore
    reboot.update(restored_at=now().isoformat(), restore_command=str(cmd.pk),
                  missing=[m for m in result.get("missing") or [] if isinstance(m, dict)])
    host.observed = {**host.observed, "reboot": reboot}
    host.save(update_fields=["observed"])
    _gpus_missing(host, reboot)


def host_reboot_settled(*, host_id, boot_id: str) -> None:
    """Compute has settled every VM of the host's reboot `boot_id` (and its restore reported): the reboot record
    gets `settled_at`, so the reconciler stops reading the host until its next reboot. Nothing when the host has
    rebooted again since or the record is settled already."""
    with transaction.atomic():
        host = Host.objects.select_for_update().get(pk=host_id)
        reboot = dict((host.observed or {}).get("reboot") or {})
        if reboot.get("boot_id") != boot_id or "settled_at" in reboot:
            return
        reboot["settled_at"] = now().isoformat()
        host.observed = {**host.observed, "reboot": reboot}
        host.save(update_fields=["observed"])


def _apply_result(cmd: AgentCommand, result: dict) -> None:
    host = Host.objects.select_for_update().get(pk=cmd.host_id)
    gpu = Gpu.objects.filter(host=host, index=cmd.payload.get("gpu_index")).first()
    if cmd.kind == CommandKind.APPLY_MIG_LAYOUT and gpu is not None:
        gpu.mode = GpuMode.MIG
        gpu.observed = {**gpu.observed, "mig_restore_pending": False}
        gpu.save(update_fields=["mode", "observed"])
        _layout_replace(gpu, result.get("layout", cmd.payload["layout"]))
    elif cmd.kind == CommandKind.CREATE_GPU_INSTANCE and gpu is not None:
        p = cmd.payload
        GpuInstance.objects.update_or_create(gpu=gpu, start=result.get("start", p["start"]), defaults={
            "profile_id": p["profile_id"], "profile": p["profile"], "size": p["size"], "gi_id": result.get("gi_id")})
    elif cmd.kind == CommandKind.DESTROY_GPU_INSTANCE and gpu is not None:
        GpuInstance.objects.filter(gpu=gpu, start=cmd.payload["start"]).delete()
    elif cmd.kind == CommandKind.RESET_GPU and gpu is not None:
        health = result.get("health", GpuHealth.UNKNOWN)
        health = health if health in GpuHealth.values else GpuHealth.UNKNOWN
        # a faulty GPU (an open incident) returns to service only through staff's mark-healthy, which closes the
        # incident: a reset's passing health check (e.g. the scrub after its VM moved off) leaves it faulty
        if not (gpu.health == GpuHealth.FAULTY and health == GpuHealth.OK
                and Incident.objects.filter(gpu=gpu, end__isnull=True).exists()):
            gpu.health = health
            gpu.save(update_fields=["health"])
    elif cmd.kind in (CommandKind.ACTIVATE_PARTITION, CommandKind.DEACTIVATE_PARTITION):
        if "active_partitions" in result:
            host.active_partitions = sorted(result["active_partitions"])
            host.save(update_fields=["active_partitions"])
