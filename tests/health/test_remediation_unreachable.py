"""A VM re-created while its old host's libvirt does not answer: the move goes on (the old host is left as it
is and cordoned), and when the host answers again the reconciler removes the stale domain there, so no second
copy of the VM ever runs; the tenant's instance keeps running on the new host."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.audit.models import AuditEvent
from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Instance
from apps.compute.services.reconcile import instances_reconcile
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance

from .test_remediation import FAULT, _finish, _launch, _policy, _xid79, setup  # noqa: F401

pytestmark = pytest.mark.django_db


def test_recreate_off_an_unreachable_host_then_the_stale_domain_is_removed(world, setup, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COMPUTE_TRANSIENT_RETRIES", "2")
    s = setup
    _policy(world, "auto", notice=60)
    inst = _launch(world, s)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    (rem_id,) = _xid79(old_host)["applied"]["remediations"]
    FakeDriver.unreachable.add(old_host.libvirt_uri)
    with time_machine.travel(FAULT + dt.timedelta(seconds=60), tick=False):
        remediations_advance()
        op = _finish(Remediation.objects.get(pk=rem_id).operation_id, s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        assert "cannot connect" in op.state["old_host_unreachable"]
        remediations_advance()
    inst = Instance.objects.get(pk=inst.pk)
    assert (inst.status, inst.host_id) == ("active", new_host.pk)
    on = sorted(uri for uri, h in FakeDriver._hosts.items() if inst.pk in h.domains)
    assert on == sorted([old_host.libvirt_uri, new_host.libvirt_uri])  # the old copy is still there, unreachable

    assert instances_reconcile().stale_removed == []  # still unreachable: nothing to do
    FakeDriver.unreachable.discard(old_host.libvirt_uri)
    report = instances_reconcile()
    assert report.stale_removed == [str(inst.pk)] and str(inst.pk) not in report.unknown
    assert [uri for uri, h in FakeDriver._hosts.items() if inst.pk in h.domains] == [new_host.libvirt_uri]
    assert AuditEvent.objects.filter(action="compute.reconcile.stale_domain_removed").count() == 1
    assert Instance.objects.get(pk=inst.pk).status == "active"
