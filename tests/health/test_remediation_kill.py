"""A worker killed at each step of a VM's re-create resumes without two VMs, a leaked allocation, or a lost port
or partition membership.

The kill is the worst moment of a step: its driver calls are done (the fake hypervisor keeps them, as a real one
would) but its transaction never commits, because the process dies (`Killed`, a BaseException the runner does
not catch, rolls the step back like a SIGKILL before COMMIT). The operation is then resumed with the real runner,
as `operation_resume_stalled` does after a worker restart. The real-QEMU SIGKILL of a create is
tests/compute/test_worker_kill_embed.py; the recreate reuses that workflow's steps."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import time_machine

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Instance
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance
from apps.inventory.models import HcaPort
from apps.networking.models import IbPartitionMember
from apps.operations import workflows
from apps.operations.models import Operation
from apps.scheduling.models import Allocation

from .test_remediation import FAULT, _finish, _launch, _network_view, _policy, _xid79, setup  # noqa: F401

pytestmark = pytest.mark.django_db
STEPS = workflows.get("instance.recreate").names


class Killed(BaseException):
    """The worker process died mid-step (not an Exception: nothing in the runner handles it)."""


@pytest.fixture
def kill_at(request):
    original = workflows.get("instance.recreate")
    fired = []

    def arm(step: str):
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
    workflows.register(original)


def _live(inst_id):
    return sorted(
        (str(a.host_id), a.resource_class, a.amount)
        for a in Allocation.objects.filter(consumer_id=inst_id, period__upper_inf=True)
    )


@pytest.mark.parametrize("step", STEPS)
def test_worker_killed_at_each_recreate_step_resumes_cleanly(world, setup, kill_at, step):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=60)
    inst = _launch(world, s)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    before_net = _network_view(inst.pk)
    before_alloc = [(r, n) for _, r, n in _live(inst.pk)]
    (rem_id,) = _xid79(old_host)["applied"]["remediations"]
    fired = kill_at(step)
    with time_machine.travel(FAULT + dt.timedelta(seconds=60), tick=False):
        assert remediations_advance()["started"] == 1
        op_id = Remediation.objects.get(pk=rem_id).operation_id
        for _ in range(3):
            try:
                op = _finish(op_id, s.hosts)
                break
            except Killed:
                op = Operation.objects.get(pk=op_id)
                assert op.status in ("pending", "running") and op.step == step  # the step was rolled back
        assert fired == [step]
        assert (op.status, op.error_code) == ("succeeded", ""), op.error_detail
        assert list(op.steps_done) == list(STEPS)
        remediations_advance()
    inst = Instance.objects.get(pk=inst.pk)
    assert (inst.status, inst.host_id) == ("active", new_host.pk)
    assert Remediation.objects.get(pk=rem_id).status == "succeeded"
    # exactly one VM: a domain on the new host only
    domains = [uri for uri, h in FakeDriver._hosts.items() if inst.pk in h.domains]
    assert domains == [new_host.libvirt_uri]
    # no leaked allocation: the same resources as before, all on the new host, nothing left on the old one
    live = _live(inst.pk)
    assert [(r, n) for _, r, n in live] == before_alloc and {h for h, _, _ in live} == {str(new_host.pk)}
    # the same port (MAC, address, security group); the partition holds the new host's GUIDs only
    assert _network_view(inst.pk) == before_net
    new_guids = {p.port_guid for p in HcaPort.objects.filter(host=new_host)}
    assert set(IbPartitionMember.objects.filter(instance_id=inst.pk).values_list("guid", flat=True)) == new_guids
