"""Fencing a silent host before its VMs move (ADR 0218), end to end with explicit times: the agent goes silent →
`heartbeat_lost` (class host_unreachable, table v5) takes the host out and opens a fence, not a remediation → the
fence beat powers the host off through its BMC (the `fake` fencing driver) and reads it back `off` → only then the
VM's remediation opens, with no checkpoint wait (a powered-off host has nothing to checkpoint), and the VM is
re-created on the healthy host. A host with no BMC, or a BMC that never reads back off, is not fenced: its VM is
held and stays where it is until staff confirm by hand (audited), which moves it."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.audit.models import AuditEvent
from apps.compute.models import Instance
from apps.health.drivers.fake import FakeFenceDriver
from apps.health.models import HealthEvent, HostFence, Remediation
from apps.health.services.fencing import fence_device_set, fence_target, fences_advance
from apps.health.services.heartbeat import heartbeat_lost_detect
from apps.health.services.remediation import FENCED_NOTICE, remediations_advance
from apps.inventory.models import AgentCredential, Host

from .test_api import _staff
from .test_remediation import _finish, _launch, _policy, setup  # noqa: F401

pytestmark = pytest.mark.django_db
SILENT_FROM = dt.datetime(2026, 6, 5, tzinfo=dt.UTC)
DETECT = SILENT_FROM + dt.timedelta(seconds=315)


@pytest.fixture(autouse=True)
def fake_fencing(settings):
    settings.HEALTH_FENCE_DRIVER = "fake"
    settings.HEALTH_HEARTBEAT_LOST_SECONDS = 300
    settings.HEALTH_FENCE_CONFIRM_SECONDS = 120
    FakeFenceDriver.reset()
    yield
    FakeFenceDriver.reset()


def _silent(host: Host, others) -> HealthEvent:
    for h in [host, *others]:
        if not AgentCredential.objects.filter(host=h, revoked_at__isnull=True).exists():
            AgentCredential.objects.create(host=h, prefix=f"f{h.pk.hex[:8]}", secret_hash="x")
    Host.objects.filter(pk=host.pk).update(last_heartbeat_at=SILENT_FROM)
    Host.objects.filter(pk__in=[h.pk for h in others]).update(last_heartbeat_at=DETECT)
    with time_machine.travel(DETECT, tick=False):
        (event,) = heartbeat_lost_detect()
    return event


def test_a_silent_host_is_powered_off_then_its_vm_moves_at_once(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=900)
    inst = _launch(world, s)
    old, (new,) = inst.host, [h for h in s.hosts if h.pk != inst.host_id]
    fence_device_set(actor=None, host=old, address="https://bmc-old.test", username="admin", password="s3cret",
                     system_id="/redfish/v1/Systems/1")

    event = _silent(old, [new])
    assert (event.classification, event.classification_version) == ("host_unreachable", 5)
    assert event.applied["actions"] == ["host_mark_faulty"]  # out of placement, the provider's incident opens
    assert event.applied["fence"]["status"] == "pending"
    assert "remediations" not in event.applied  # nothing moves before the host is known to be off
    assert not Remediation.objects.exists()

    with time_machine.travel(DETECT + dt.timedelta(seconds=15), tick=False):
        assert fences_advance() == {"confirmed": 1, "failed": 0}
        assert fences_advance() == {"confirmed": 0, "failed": 0}  # idempotent
        assert FakeFenceDriver.calls == [("power_off", "https://bmc-old.test"),
                                         ("power_state", "https://bmc-old.test")]
        fence = HostFence.objects.get()
        assert (fence.status, fence.method, fence.power_state, fence.attempts) == ("confirmed", "bmc", "off", 1)
        (rem,) = Remediation.objects.all()
        # a powered-off host cannot checkpoint: the notice says so and its deadline is now, not 900 s later
        assert (rem.status, rem.deadline_at, rem.reason) == ("notice", DETECT + dt.timedelta(seconds=15),
                                                             FENCED_NOTICE)
        maintenance = world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["maintenance"]
        assert (maintenance["status"], maintenance["reason"]) == ("notice", FENCED_NOTICE)
        assert remediations_advance()["started"] == 1
        rem.refresh_from_db()
        op = _finish(rem.operation_id, s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        remediations_advance()
    inst.refresh_from_db()
    assert (inst.status, inst.host_id) == ("active", new.pk)
    event.refresh_from_db()
    assert event.applied["fence"]["status"] == "confirmed"
    assert event.applied["remediations"] == [str(rem.pk)]
    assert AuditEvent.objects.filter(action="health.fence.confirm").count() == 1
    # the BMC's credentials are stored encrypted, never in clear
    assert "s3cret" not in old.fence_device.credentials_encrypted
    assert fence_target(old).password == "s3cret"
    rows = _staff().get("/api/v1/health/fences").json()["results"]
    assert [(r["host"], r["status"], r["method"]) for r in rows] == [(old.name, "confirmed", "bmc")]


def test_a_host_without_a_bmc_is_held_until_staff_confirm_it_is_off(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=900)
    inst = _launch(world, s)
    old, (new,) = inst.host, [h for h in s.hosts if h.pk != inst.host_id]
    event = _silent(old, [new])

    with time_machine.travel(DETECT + dt.timedelta(seconds=15), tick=False):
        assert fences_advance() == {"confirmed": 0, "failed": 1}
    fence = HostFence.objects.get()
    assert (fence.status, fence.reason) == ("failed", "the host has no BMC with credentials")
    (held,) = Remediation.objects.all()
    assert held.status == "held" and held.reason.startswith("not fenced (the host has no BMC with credentials)")
    event.refresh_from_db()
    assert event.applied["fence"] == {"id": str(fence.pk), "status": "failed",
                                      "reason": "the host has no BMC with credentials"}
    with time_machine.travel(DETECT + dt.timedelta(hours=1), tick=False):
        assert remediations_advance() == {"started": 0, "finished": 0}
    assert Instance.objects.get(pk=inst.pk).host_id == old.pk  # not moved: the host may still run it

    staff = _staff()
    assert world.client_a.get(f"/api/v1/health/fences/{fence.pk}").status_code == 404  # tenants never see it
    for body in ({}, {"reason": "  "}):  # the code docs/health.md names, not a generic validation_error
        r = staff.post(f"/api/v1/health/fences/{fence.pk}/confirm", body, format="json")
        assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json")
        assert (r.json()["code"], r.json()["errors"]) == ("reason_required", {"reason": ["required"]})
    assert HostFence.objects.get().status == "failed"  # no partial write
    with time_machine.travel(DETECT + dt.timedelta(hours=2), tick=False):
        r = staff.post(f"/api/v1/health/fences/{fence.pk}/confirm",
                       {"reason": "PDU outlet switched off, checked at the rack"}, format="json")
        assert r.status_code == 200, r.content
        assert (r.json()["status"], r.json()["method"], r.json()["confirmed_by"]) == (
            "confirmed", "manual", "ops@health.test")
        rem = Remediation.objects.get(status="notice")
        assert rem.deadline_at == DETECT + dt.timedelta(hours=2)
        assert remediations_advance()["started"] == 1
        rem.refresh_from_db()
        assert _finish(rem.operation_id, s.hosts).status == "succeeded"
    assert Instance.objects.get(pk=inst.pk).host_id == new.pk
    (audit,) = AuditEvent.objects.filter(action="health.fence.confirm")
    assert audit.after["method"] == "manual"
    r = staff.post(f"/api/v1/health/fences/{fence.pk}/confirm", {"reason": "again"}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "invalid_state"


def test_a_bmc_that_never_reads_back_off_is_not_trusted(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=900)
    inst = _launch(world, s)
    old, (new,) = inst.host, [h for h in s.hosts if h.pk != inst.host_id]
    fence_device_set(actor=None, host=old, address="https://bmc-stuck.test", username="a", password="b")
    FakeFenceDriver.stuck("https://bmc-stuck.test")  # accepts the power-off, keeps reading "on"
    _silent(old, [new])
    with time_machine.travel(DETECT + dt.timedelta(seconds=15), tick=False):
        assert fences_advance() == {"confirmed": 0, "failed": 0}
    assert HostFence.objects.get().status == "powering_off"
    assert not Remediation.objects.exists()
    with time_machine.travel(DETECT + dt.timedelta(seconds=120), tick=False):
        assert fences_advance() == {"confirmed": 0, "failed": 1}
    fence = HostFence.objects.get()
    assert fence.reason == "the BMC did not read the power back off within 120 s (last: on)"
    assert Remediation.objects.get().status == "held"
    assert Instance.objects.get(pk=inst.pk).host_id == old.pk


def test_fence_device_needs_a_url():
    from apps.core.errors import ValidationFailed
    from tests.inventory.helpers import make_host

    with pytest.raises(ValidationFailed) as exc:
        fence_device_set(actor=None, host=make_host("fd-1"), address="10.0.0.1", username="a", password="b")
    assert exc.value.code == "invalid_bmc"


def test_a_compute_ib_port_down_moves_the_vm_under_its_notice(world, setup):  # noqa: F811
    """Table v5: a compute InfiniBand port down cuts the VM's RDMA off the fabric: the host is the provider's
    fault and the VM gets an ordinary remediation (the checkpoint notice applies: the host still runs; no fence)."""
    from apps.health.services.ingest import health_event_ingest
    from apps.inventory.models import HcaPort

    s = setup
    _policy(world, "auto", notice=900)
    inst = _launch(world, s)
    port = HcaPort.objects.filter(host=inst.host).order_by("device").first()
    with time_machine.travel(DETECT, tick=False):
        event, _ = health_event_ingest(actor=None, host=inst.host, kind="ib_port_down", hca_device=port.device,
                                       observed_at=DETECT)
    assert (event.classification, event.applied["actions"]) == ("fabric_degraded", ["host_mark_faulty"])
    assert "fence" not in event.applied and not HostFence.objects.exists()
    (rem,) = Remediation.objects.all()
    assert (rem.status, rem.deadline_at, rem.reason) == ("notice", DETECT + dt.timedelta(seconds=900), "")
    assert event.applied["remediations"] == [str(rem.pk)]
