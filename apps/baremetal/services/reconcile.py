"""Reconcile nodes with the provisioning service (beat, every 60 s; queue `reconcile`).

For every node with an Ironic id and no unfinished operation: read it back and mirror provision state, power,
maintenance and last error (`nodes.node_observe`). A power-off nobody asked for on an `active` instance's node
is recorded like a guest that powered itself off (`sync_stopped`, audited; the host stays the tenant's). A node
that does not answer is counted and logged, and its row keeps the last state read (`observed_at` says when).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction

from apps.audit.services import audit_record
from apps.compute.models import Instance
from apps.compute.states import INSTANCE_TRANSITIONS, InstanceStatus
from apps.core.drivers import DriverError
from apps.core.transitions import transition
from apps.operations.selectors import targets_with_unfinished_operations

from ..drivers.base import PowerState
from ..models import BaremetalNode
from .driver import baremetal_driver
from .nodes import TARGET, node_observe

log = logging.getLogger("gpucloud.baremetal")


@dataclass
class NodesReconcileReport:
    nodes: int = 0
    changed: int = 0
    stopped: int = 0
    unreachable: list[str] = field(default_factory=list)


def nodes_reconcile() -> NodesReconcileReport:
    report = NodesReconcileReport()
    nodes = list(BaremetalNode.objects.exclude(ironic_id="").select_related("host"))
    busy = targets_with_unfinished_operations(target_type=TARGET, target_ids=[n.pk for n in nodes])
    drv = baremetal_driver()
    for node in nodes:
        if node.pk in busy:
            continue
        report.nodes += 1
        try:
            seen = drv.get(node.ironic_id)
        except DriverError as exc:
            report.unreachable.append(node.host.name)
            log.warning("baremetal_reconcile_unreachable", extra={"node": node.ironic_id, "error": str(exc)})
            continue
        before = (node.provision_state, node.power_state, node.maintenance)
        with transaction.atomic():
            node_observe(node, seen)
            if before != (node.provision_state, node.power_state, node.maintenance):
                report.changed += 1
            if seen.instance_id and seen.state.power == PowerState.OFF and _sync_stopped(seen.instance_id):
                report.stopped += 1
    return report


def _sync_stopped(instance_id: str) -> bool:
    from apps.compute.services.instances import TARGET as INSTANCE_TARGET
    from apps.compute.services.reconcile import instance_observe

    inst = Instance.objects.select_for_update().filter(pk=instance_id, status=InstanceStatus.ACTIVE).first()
    if inst is None or targets_with_unfinished_operations(target_type=INSTANCE_TARGET, target_ids=[inst.pk]):
        return False
    instance_observe(inst, str(PowerState.OFF))
    transition(inst, "sync_stopped", INSTANCE_TRANSITIONS)
    audit_record(actor=None, action="baremetal.reconcile.sync_stopped", target=inst,
                 after={"observed_state": str(PowerState.OFF)})
    return True
