"""A worker killed at each step of a bare-metal deploy and delete resumes with no second deploy, no leaked
allocation and exactly one receipt.

The kill is the worst moment of a step: its driver calls are done (the fake bare-metal driver keeps them, as
Ironic would) but its transaction never commits (`Killed`, a BaseException the runner does not catch, rolls the
step back like a SIGKILL before COMMIT). The operation is then resumed with the real runner, as
`operation_resume_stalled` does after a worker restart."""
from __future__ import annotations

import dataclasses

import pytest

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.workflows import KINDS
from apps.compute.models import Instance
from apps.operations import workflows
from apps.operations.runner import operation_run_step
from apps.scheduling.models import Allocation

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db
CREATE, DELETE = KINDS["instance.create"], KINDS["instance.delete"]
CLEAN = "baremetal.node.clean"


class Killed(BaseException):
    """The worker process died mid-step (not an Exception: nothing in the runner handles it)."""


@pytest.fixture
def kill_at():
    originals = {k: workflows.get(k) for k in (CREATE, DELETE, CLEAN)}
    fired: list[str] = []

    def arm(kind: str, step: str):
        original = originals[kind]
        real = original.fn(step)

        def dying(op):
            result = real(op)
            if not fired:
                fired.append(step)
                raise Killed(step)
            return result

        steps = tuple((name, dying if name == step else fn) for name, fn in original.steps)
        workflows.register(dataclasses.replace(original, steps=steps))
        return fired

    yield arm
    for wf in originals.values():
        workflows.register(wf)


@pytest.fixture
def node(world, bm_driver):
    node_id, op = enroll(world.staff_client, bm_host())
    assert op.status == "succeeded"
    return BaremetalNode.objects.get(pk=node_id)


@pytest.fixture
def deploys(bm_driver, monkeypatch):
    calls: list[str] = []
    real = bm_driver.deploy

    def counting(node, request, **kw):
        calls.append(request.instance_id)
        return real(node, request, **kw)

    monkeypatch.setattr(bm_driver, "deploy", counting)
    return calls


def _resume(op_id):
    for _ in range(60):
        try:
            op = drive(op_id)
        except Killed:
            continue
        if op.status != "running":
            return op
    raise AssertionError("the operation did not finish")


def _live(inst_id):
    return sorted((a.resource_class, a.amount) for a in Allocation.objects.filter(consumer_id=inst_id,
                                                                                  period__upper_inf=True))


@pytest.mark.parametrize("step", workflows.get(CREATE).names)
def test_killed_at_each_deploy_step_resumes_with_one_deploy(world, bm_driver, bm_flavor, node, kill_at, deploys,
                                                             step):
    fired = kill_at(CREATE, step)
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor), format="json")
    inst_id, op_id = resp.data["instance"]["id"], resp.data["operation"]["id"]
    op = _resume(op_id)
    assert fired == [step] and op.status == "succeeded"
    assert Instance.objects.get(pk=inst_id).status == "active"
    assert deploys == [inst_id]  # the killed deploy step's request was seen, not sent again
    assert sum(n for rc, n in _live(inst_id) if rc == "gpu") == 8
    assert Allocation.objects.filter(period__upper_inf=True).exclude(consumer_id=inst_id).count() == 0


@pytest.mark.parametrize("step", workflows.get(DELETE).names)
def test_killed_at_each_delete_step_resumes_with_nothing_left(world, bm_driver, bm_flavor, node, kill_at, step):
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor), format="json")
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    fired = kill_at(DELETE, step)
    op_id = world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]
    try:
        operation_run_step(op_id)
    except Killed:
        pass
    op = _resume(op_id)
    assert fired == [step] and op.status == "succeeded"
    assert Instance.objects.get(pk=inst_id).status == "deleted" and _live(inst_id) == []
    seen = bm_driver.get(node.ironic_id)
    assert (seen.state.provision, seen.instance_id) == ("available", "")
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1
    from apps.inventory.models import Host

    assert Host.objects.get(pk=node.host_id).state == "available"


@pytest.mark.parametrize("step", workflows.get(CLEAN).names)
def test_killed_at_each_step_of_the_hosts_cleaning_resumes_with_one_receipt(world, bm_driver, bm_flavor, node,
                                                                            kill_at, step):
    """The host's cleaning after a delete (its own operation) killed at each step resumes from its last commit:
    one receipt, the host back in service."""
    from apps.operations.models import Operation

    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor), format="json")
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    fired = kill_at(CLEAN, step)
    op_id = world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]
    assert drive(op_id, follow=False).status == "succeeded"
    clean_id = Operation.objects.get(pk=op_id).state["clean_operation"]
    clean = _resume(clean_id)
    assert fired == [step] and clean.status == "succeeded"
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1
    from apps.inventory.models import Host

    assert Host.objects.get(pk=node.host_id).state == "available"
