"""Exit receipts: what was done when a bare-metal instance left its host, signed with the deployment's Ed25519
key (`secrets.signing_key`).

The document (``payload``, canonical JSON: sorted keys, separators ``,`` and ``:``, UTF-8) is::

    {"type": "gpucloud.baremetal.exit-receipt", "version": 1, "receipt_id", "issued_at",
     "key_id", "instance": {"id", "name", "project"}, "node": {"id", "name", "host", "hardware_type"},
     "steps": [{"step", "result", "how", "started_at", "finished_at", "detail"}, ...]}

Each step says how it ran (`how`): ``executed``; ``simulated by fake-hardware`` (Ironic's fake-hardware type
reports the step done without touching hardware); or ``skipped: <reason>``. A receipt never claims a step that
did not run. Verify: Ed25519 over the payload's bytes with the key of `GET /api/v1/bare-metal/receipt-key/`.
"""
from __future__ import annotations

import base64
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from apps.core.clock import now
from apps.core.ids import uuid7

from ..models import BaremetalNode, ExitReceipt
from . import secrets

FAKE = "fake-hardware"


def canonical(document: dict) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _steps(node: BaremetalNode, state: dict) -> list[dict]:
    simulated = node.driver == FAKE
    how = "simulated by fake-hardware" if simulated else "executed"
    cleaning = state.get("cleaning", {})
    steps = [
        {"step": "undeploy", "result": "succeeded", "how": "executed",
         "started_at": state.get("undeploy_started_at"), "finished_at": cleaning.get("finished_at"),
         "detail": f"Ironic undeploy from {state.get('undeploy_from', 'active')}: instance torn down, powered off"},
        {"step": "automated_cleaning", "result": cleaning.get("result", "unknown"), "how": how,
         "started_at": state.get("undeploy_started_at"), "finished_at": cleaning.get("finished_at"),
         "detail": cleaning.get("error") or ("Ironic automated cleaning (disk erase per the conductor's "
                                             "configured clean steps) ended in available")},
        {"step": "disk_erase_read_back", "result": "not_run", "how": (
            "skipped: fake-hardware has no disks" if simulated else
            "skipped: read-back of erased blocks needs the node agent, not installed on bare-metal hosts"),
         "started_at": None, "finished_at": None, "detail": ""},
        {"step": "gpu_reset_and_validation", "result": "not_run",
         "how": "skipped: no node agent runs on bare-metal hosts in this version", "started_at": None,
         "finished_at": None, "detail": ""},
        {"step": "tenant_networks_detached", "result": "succeeded",
         "how": "executed" if state.get("had_networks") else "skipped: the instance had no tenant network",
         "started_at": None, "finished_at": None, "detail": ""},
    ]
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
