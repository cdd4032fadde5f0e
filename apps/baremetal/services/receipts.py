"""Exit receipts: what was done when a bare-metal instance left its host, signed with the deployment's Ed25519
key (`secrets.signing_key`).

The document (``payload``, canonical JSON: sorted keys, separators ``,`` and ``:``, UTF-8) is::

    {"type": "gpucloud.baremetal.exit-receipt", "version": 1, "receipt_id", "issued_at",
     "key_id", "instance": {"id", "name", "project"}, "node": {"id", "name", "host", "hardware_type"},
     "steps": [{"step", "result", "how", "started_at", "finished_at", "detail"}, ...]}

`disk_erase_read_back` also has ``sampled_blocks``, ``block_bytes`` and ``blocks_with_data`` (byte offsets of
sampled blocks that still held data) when it ran (`services.erase`); `gpu_reset` and `gpu_validation` are the node
agent's GPU reset with its health check and its diagnostics (`workflows.gpu_checks`).
`tenant_networks_detached` also lists ``pkey_members_removed`` (``fabric``, ``pkey`` as ``0x0101``, ``guid``: the
host's HCA port GUIDs that left the tenant's InfiniBand partitions); one ``pkey_removal_verified`` step per fabric
(with ``fabric``) says whether its subnet manager applied the removal (`workflows.verify_fabric`).

Each step says how it ran (`how`): ``executed``; ``simulated by fake-hardware`` (Ironic's fake-hardware type
reports the step done without touching hardware); ``skipped: <reason>``; or ``unverified: <reason>`` (Ironic
kept no record that would show whether it ran; `result` is then ``unknown``). A receipt never claims a step that
did not run: the automated-cleaning step is read back from Ironic's node history (`cleaning_evidence`), never
inferred from the node being `available` again. Verify: Ed25519 over the payload's bytes with the key of
`GET /api/v1/bare-metal/receipt-key/`.
"""
from __future__ import annotations

import base64
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from apps.core.clock import now
from apps.core.ids import uuid7

from ..drivers.base import FLOW_PREFIXES, Node, NodeEvent, automated_cleaning_runs
from ..drivers.base import ProvisionState as P
from ..models import BaremetalNode, ExitReceipt
from . import secrets

FAKE = "fake-hardware"


def history_mark(events: list[NodeEvent] | None) -> dict:
    """Where the node's history stood before the undeploy was sent (`cleaning_evidence` reads what came after):
    `{"id", "at"}` of its newest entry (`""` when empty, None when the service keeps no history)."""
    if events is None:
        return {"id": None, "at": None}
    last = events[-1] if events else None
    return {"id": last.id if last else "", "at": last.created_at if last else ""}


def _after(events: list[NodeEvent], mark: dict | None) -> list[NodeEvent]:
    if mark is None:  # an undeploy started before the mark was kept: what follows the instance's last deploy
        last = max((i for i, e in enumerate(events) if e.event_type.startswith("deployment_")), default=-1)
        return events[last + 1:]
    if not mark.get("id"):
        return list(events)
    ids = [e.id for e in events]
    if mark["id"] in ids:
        return events[ids.index(mark["id"]) + 1:]
    return [e for e in events if e.created_at > (mark.get("at") or "")]  # the mark was pruned since


def cleaning_evidence(*, node: BaremetalNode, seen: Node, events: list[NodeEvent] | None,
                      mark: dict | None) -> dict:
    """What Ironic did about automated cleaning after this undeploy, read back from it: `seen` is the node once it
    rested (`available` or `clean failed`), `events` its history (None when the service keeps none), `mark` the
    `history_mark` taken before the undeploy was sent. Returns the receipt step's fields: `result` (`succeeded`,
    `failed`, `not_run`, `unknown`), `how`, `detail`, `started_at`/`finished_at` (Ironic's clock; None when it
    did not run), `steps` (the clean steps the conductor ran, `interface.step`), `automated_clean` (the node's
    field) and `observed_at` (ours)."""
    ran = "simulated by fake-hardware" if node.driver == FAKE else "executed"
    out = {"result": "unknown", "how": "", "detail": "", "started_at": None, "finished_at": None, "steps": [],
           "automated_clean": seen.automated_clean, "observed_at": now().isoformat()}
    failed = seen.state.provision == P.CLEAN_FAILED
    runs = automated_cleaning_runs(_after(events, mark)) if events is not None else []
    run = runs[-1] if runs else None
    if run is not None:
        out.update(started_at=run.started_at, finished_at=run.finished_at, steps=list(run.steps))
    steps = ", ".join(run.steps) if run is not None and run.steps else "none"
    if failed or (run is not None and run.result == "failed"):
        out.update(result="failed", how=ran, detail=seen.state.last_error or (run.error if run else ""),
                   finished_at=out["finished_at"] or out["observed_at"])
    elif run is not None and run.result == "succeeded":
        out.update(result="succeeded", how=ran, detail=f"Ironic's automated cleaning ran the clean steps: {steps}" + (
            " (fake-hardware's steps touch no hardware)" if node.driver == FAKE else ""))
    elif run is not None:
        out.update(how="unverified: Ironic recorded the start of automated cleaning but not its end",
                   detail=f"clean steps: {steps}")
    elif seen.automated_clean is False:
        out.update(result="not_run", how="skipped: automated cleaning is disabled for this node")
    elif events is None:
        out.update(how="unverified: the provisioning service keeps no node history (Ironic API 1.78)")
    elif seen.automated_clean is None and any(e.event_type.startswith(FLOW_PREFIXES) for e in events):
        out.update(result="not_run", how="skipped: automated cleaning is disabled in Ironic's configuration "
                                         "and not requested for this node")
    else:
        out.update(how="unverified: Ironic recorded no cleaning for this node "
                       "([conductor]record_step_flows_in_history is off?)")
    return out


def canonical(document: dict) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _recorded(step: str, check: dict | None, extra: tuple[str, ...] = ()) -> dict:
    """A step the delete recorded in its state (`workflows.erase_read_back`, `workflows.gpu_checks`); a delete that
    started before this version recorded them says so, as skipped."""
    if not check:
        return {"step": step, "result": "not_run", "how": "skipped: not run by the version that handled this delete",
                "started_at": None, "finished_at": None, "detail": ""}
    out = {"step": step, **{k: check.get(k) for k in ("result", "how", "started_at", "finished_at")},
           "detail": check.get("detail") or ""}
    out.update({k: check[k] for k in extra if k in check})
    return out


def _steps(node: BaremetalNode, state: dict) -> list[dict]:
    cleaning = state.get("cleaning", {})
    steps = [
        {"step": "undeploy", "result": "succeeded", "how": "executed",
         "started_at": state.get("undeploy_started_at"), "finished_at": cleaning.get("observed_at"),
         "detail": f"Ironic undeploy from {state.get('undeploy_from', 'active')}: instance torn down, powered off"},
        {"step": "automated_cleaning", "result": cleaning.get("result", "unknown"),
         "how": cleaning.get("how") or "unverified: no cleaning was read back from Ironic",
         "started_at": cleaning.get("started_at"), "finished_at": cleaning.get("finished_at"),
         "detail": cleaning.get("detail", "")},
        _recorded("disk_erase_read_back", state.get("erase_read_back"), extra=("sampled_blocks", "block_bytes",
                                                                              "blocks_with_data")),
        _recorded("gpu_reset", state.get("gpu_reset")),
        _recorded("gpu_validation", state.get("gpu_validation")),
        {"step": "tenant_networks_detached", "result": "succeeded",
         "how": "executed" if state.get("had_networks") else "skipped: the instance had no tenant network",
         "started_at": None, "finished_at": state.get("networks_detached_at") if state.get("had_networks") else None,
         "detail": "", "pkey_members_removed": [
             {k: m[k] for k in ("fabric", "pkey", "guid")} for m in state.get("pkey_members_removed") or []]},
    ]
    for fabric, check in sorted((state.get("fabric") or {}).items()):
        steps.append({"step": "pkey_removal_verified", "fabric": fabric, "result": check["result"],
                      "how": check["how"], "started_at": state.get("networks_detached_at"),
                      "finished_at": check.get("at"), "detail": check.get("detail") or (
                          f"the subnet manager of {fabric} applied partitions without the host's GUIDs"
                          if check["result"] == "succeeded" else "")})
    return steps


def receipt_issue(*, instance, node: BaremetalNode, operation) -> ExitReceipt:
    """Sign and store the receipt of `instance` leaving `node` (idempotent: one per instance; a retried step
    returns the one already issued). Call in the delete operation's step transaction."""
    existing = ExitReceipt.objects.filter(instance_id=instance.pk).first()
    if existing is not None:
        return existing
    pub = secrets.signing_key().public_key()
    receipt_id = uuid7()
    document = {
        "type": "gpucloud.baremetal.exit-receipt", "version": 1, "receipt_id": str(receipt_id),
        "issued_at": now().isoformat(), "key_id": secrets.key_id(pub),
        "instance": {"id": str(instance.pk), "name": instance.name, "project": str(instance.project_id)},
        "node": {"id": node.ironic_id, "name": node.host.name, "host": str(node.host_id),
                 "hardware_type": node.driver},
        "steps": _steps(node, operation.state),
    }
    payload = canonical(document)
    return ExitReceipt.objects.create(id=receipt_id, project_id=instance.project_id, instance_id=instance.pk,
                                      node=node, payload=payload, signature=secrets.sign(payload),
                                      key_id=document["key_id"])


def receipt_verify(*, payload: str, signature: str, public_key_pem: str) -> bool:
    """True when `signature` (base64) is the Ed25519 signature of `payload` by the key in `public_key_pem`."""
    try:
        key = load_pem_public_key(public_key_pem.encode())
        key.verify(base64.b64decode(signature, validate=True), payload.encode())
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True
