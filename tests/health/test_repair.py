"""Repair of a failed GPU or host through the node agent (the real executor on the fake backend, reporting through
the control plane's services), the return-to-service check, RMA after repeated failures, and host acceptance,
with explicit times."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import time_machine
from gpucloud_agent.backends.fake import FakeBackend
from gpucloud_agent.executor import Executor

from apps.compute.models import Instance
from apps.health.models import Remediation, Repair, Rma
from apps.health.services.remediation import remediations_advance
from apps.health.services.repair import repairs_advance
from apps.inventory.models import AgentCommand, AgentCredential, Gpu, Host, Incident
from apps.inventory.services.agent import (
    agent_command_report,
    agent_commands_pull,
    agent_enroll,
    enrollment_token_create,
)
from apps.reservations.models import Notification
from tests.compute.conftest import gpu_host
from tests.core.test_business_metrics import scrape

from .test_api import _agent, _staff
from .test_remediation import FAULT, _finish, _launch, _policy, _xid79, setup  # noqa: F401

pytestmark = pytest.mark.django_db


class Node:
    """The agent of one host: the real executor on a fake driver, pulling and reporting through the services."""

    def __init__(self, host: Host):
        self.host, self.backend = host, FakeBackend("hgx-h100", host_id=str(host.pk))
        self.executor = Executor(self.backend)

    def cycle(self) -> list[str]:
        cred = AgentCredential.objects.get(host=self.host, revoked_at__isnull=True)
        ran = []
        for cmd in agent_commands_pull(credential=cred):
            out = self.executor.execute({"id": str(cmd.pk), "kind": cmd.kind, "payload": cmd.payload})
            agent_command_report(credential=cred, command_id=cmd.pk, succeeded=out["succeeded"],
                                 result=out["result"], error=out["error"])
            ran.append(cmd.kind)
        return ran


def _event(host, body, at):
    with time_machine.travel(at, tick=False):
        r = _agent(host).post("/api/v1/agent/health-events", {**body, "observed_at": at.isoformat()}, format="json")
        assert r.status_code == 201, r.content
    return r.json()


def _step(at, node=None) -> list[str]:
    with time_machine.travel(at, tick=False):
        repairs_advance()
        ran = node.cycle() if node else []
        repairs_advance()
    return ran


def test_gpu_reset_then_the_check_returns_the_gpu_and_ends_its_incident(world, client):
    host = gpu_host(gpus=8)
    body = _event(host, {"kind": "xid", "xid": 48, "gpu_index": 2}, FAULT)  # double-bit ECC: reset, then check
    repair = Repair.objects.get(pk=body["applied"]["repair"])
    assert (repair.status, repair.action, repair.gpu.index) == ("waiting", "reset_gpu", 2)
    gpu = Gpu.objects.get(host=host, index=2)
    assert gpu.health == "faulty" and Incident.objects.filter(gpu=gpu, end__isnull=True).exists()
    node = Node(host)
    t1 = FAULT + dt.timedelta(seconds=15)
    assert _step(t1, node) == ["reset_gpu"]
    repair.refresh_from_db()
    assert repair.status == "checking"
    check = AgentCommand.objects.get(pk=repair.check_command_id)
    assert (check.kind, check.payload) == ("run_diagnostics", {"gpu_indexes": [2], "level": 2})
    t2 = FAULT + dt.timedelta(seconds=30)
    assert _step(t2, node) == ["run_diagnostics"]
    repair.refresh_from_db()
    assert repair.status == "passed", (repair.reason, repair.result)
    assert {k: repair.result[k] for k in ("tool", "tool_version", "driver_version", "result", "errors", "passed")} \
        == {"tool": "dcgm", "tool_version": "3.3.9", "driver_version": "550.90.07", "result": "pass", "errors": [],
            "passed": True}
    gpu.refresh_from_db()
    assert gpu.health == "ok"
    (incident,) = Incident.objects.filter(gpu=gpu)
    assert (incident.start, incident.end) == (FAULT, t2)  # the SLA downtime ends with the passed check
    assert node.backend.state["resets"]["2"] == 1 and node.backend.state["diag_runs"] == [
        {"gpu_indexes": [2], "level": 2}]
    # /metrics: the event by class, the repair's outcome and the time to recover (30 s)
    m = scrape(client)
    assert m[("gpucloud_health_events_total", (("class", "gpu_memory_uncorrectable"),))] == 1
    assert m[("gpucloud_health_repairs", (("status", "passed"),))] == 1
    assert m[("gpucloud_health_gpus", (("condition", "faulty"),))] == 0
    assert (m[("gpucloud_health_time_to_recover_seconds_count", ())],
            m[("gpucloud_health_time_to_recover_seconds_sum", ())],
            m[("gpucloud_health_time_to_recover_seconds_bucket", (("le", "60.0"),))]) == (1, 30.0, 1)


def test_a_pass_that_logged_errors_fails_and_three_failures_open_an_rma(world, settings):
    settings.HEALTH_RMA_AFTER_FAILED_REPAIRS = 3
    host = gpu_host(gpus=8)
    body = _event(host, {"kind": "ecc_dbe", "gpu_index": 5}, FAULT)
    node = Node(host)
    node.backend.set_diagnostics("pass", errors=["EUD: memory test logged 2 uncorrectable errors on GPU 5"])
    at = FAULT
    for attempt in (1, 2, 3):
        at += dt.timedelta(seconds=15)
        assert _step(at, node) == ["reset_gpu"]
        at += dt.timedelta(seconds=15)
        assert _step(at, node) == ["run_diagnostics"]
        row = Repair.objects.get(event_id=body["id"], attempt=attempt)
        assert row.status == "failed" and row.result["result"] == "pass" and row.result["passed"] is False
        assert "1 error(s) logged: EUD: memory test" in row.reason
    (rma,) = Rma.objects.all()
    gpu = Gpu.objects.get(host=host, index=5)
    assert (rma.part, rma.serial, rma.model, rma.failed_repairs, rma.opened_at, rma.closed_at) == (
        "gpu", gpu.serial, gpu.model, 3, at, None)
    assert not Repair.objects.filter(status__in=["waiting", "repairing", "checking"]).exists()
    gpu.refresh_from_db()
    assert gpu.health == "faulty" and Incident.objects.filter(gpu=gpu, end__isnull=True).exists()
    assert _step(at + dt.timedelta(minutes=1), node) == []  # nothing more is tried on an RMA'd GPU
    # staff read the records; a tenant gets a 404 like a missing endpoint
    staff = _staff()
    (listed,) = staff.get("/api/v1/health/rmas").json()["results"]
    assert {k: listed[k] for k in ("part", "serial", "gpu_index", "failed_repairs", "closed_at")} == {
        "part": "gpu", "serial": gpu.serial, "gpu_index": 5, "failed_repairs": 3, "closed_at": None}
    repairs = staff.get("/api/v1/health/repairs", {"host": host.name, "status": "failed"}).json()["results"]
    assert [(r["attempt"], r["result"]["passed"], r["result"]["tool_version"]) for r in repairs] == [
        (3, False, "3.3.9"), (2, False, "3.3.9"), (1, False, "3.3.9")]
    assert world.client_a.get("/api/v1/health/rmas").status_code == 404
    assert world.client_a.post(f"/api/v1/health/rmas/{rma.pk}/ship").status_code == 404
    with time_machine.travel(at + dt.timedelta(days=1), tick=False):
        assert staff.post(f"/api/v1/health/rmas/{rma.pk}/ship").json()["shipped_at"] == "2026-06-06T00:01:30Z"
        assert staff.post(f"/api/v1/health/rmas/{rma.pk}/ship").status_code == 409
    with time_machine.travel(at + dt.timedelta(days=9), tick=False):
        r = staff.post(f"/api/v1/health/rmas/{rma.pk}/close", {"outcome": "replaced"}, format="json")
        assert (r.status_code, r.json()["outcome"], r.json()["closed_at"]) == (200, "replaced",
                                                                               "2026-06-14T00:01:30Z")
        assert staff.post(f"/api/v1/health/rmas/{rma.pk}/close", {"outcome": "replaced"},
                          format="json").status_code == 409
    assert world.client_a.get("/api/v1/health/repairs").status_code == 404


def test_a_row_remap_failure_opens_the_rma_at_once(world):
    host = gpu_host(gpus=8)
    body = _event(host, {"kind": "xid", "xid": 64, "gpu_index": 1}, FAULT)
    rma = Rma.objects.get(pk=body["applied"]["rma"])
    assert (rma.part, rma.serial, rma.failed_repairs) == ("gpu", Gpu.objects.get(host=host, index=1).serial, 0)
    assert "repair" not in body["applied"] and not Repair.objects.exists()


def test_a_reboot_waits_for_the_tenant_to_leave_then_returns_the_host(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=60)
    inst = _launch(world, s)
    old = inst.host
    body = _xid79(old)  # gpu_lost: GPU faulty, host cordoned, reboot, move the VM
    repair = Repair.objects.get(pk=body["applied"]["repair"])
    assert (repair.action, repair.status) == ("reboot_host", "waiting")
    node = Node(old)
    assert _step(FAULT + dt.timedelta(seconds=15), node) == []  # the VM still runs there: no reboot under it
    waiting = Repair.objects.get(pk=repair.pk)  # staff see what it waits for
    assert (waiting.status, waiting.reason) == (
        "waiting", f"waiting for the host to hold no tenant: 1 still on it (instance {inst.pk})")
    at = FAULT + dt.timedelta(seconds=60)
    with time_machine.travel(at, tick=False):
        remediations_advance()
        rem = Remediation.objects.get(resource_id=inst.pk)
        assert _finish(rem.operation_id, s.hosts).status == "succeeded"
    assert Instance.objects.get(pk=inst.pk).host_id != old.pk
    at += dt.timedelta(seconds=15)
    assert _step(at, node) == ["reboot_host"]  # the old GPUs' scrub was reported with the move (`_finish`)
    assert node.backend.state["boots"] == 1
    at += dt.timedelta(seconds=15)
    assert _step(at, node) == ["run_diagnostics"]
    repair.refresh_from_db()
    old.refresh_from_db()
    gpu3 = Gpu.objects.get(host=old, index=3)
    reboot = AgentCommand.objects.get(pk=repair.repair_command_id)
    assert reboot.result["previous_boot_id"] != reboot.result["boot_id"]
    assert (repair.status, old.state, gpu3.health) == ("passed", "available", "ok")
    assert AgentCommand.objects.get(pk=repair.check_command_id).payload == {"gpu_indexes": [3], "level": 2}
    # the tenant was told (webhooks / billing e-mail): the event on its VM, the incident opened, then closed by the
    # repair; nothing names the host, and the other tenant hears nothing
    sent = {n.event: n for n in Notification.objects.filter(event__startswith="health.")}
    assert set(sent) == {"health.event", "health.incident.opened", "health.incident.closed"}
    assert {n.organization_id for n in sent.values()} == {world.org_a.pk}
    assert sent["health.event"].payload["data"] == {
        "event": body["id"], "kind": "xid", "xid": 79, "class": "gpu_lost", "provider_at_fault": True,
        "observed_at": FAULT.isoformat(), "resources": [{"type": "instance", "id": str(inst.pk),
                                                          "project": str(world.project_a.pk)}]}
    closed = sent["health.incident.closed"].payload["data"]
    assert (closed["start"], closed["end"]) == (FAULT.isoformat(), at.isoformat())
    assert closed["incident"] == sent["health.incident.opened"].payload["data"]["incident"]
    assert old.name not in json.dumps([n.payload for n in sent.values()])


def test_a_new_host_takes_no_tenant_before_its_acceptance_check_passes(world, settings):
    settings.HOST_ACCEPTANCE_CHECK = True
    host = gpu_host(gpus=8)
    Host.objects.filter(pk=host.pk).update(state="enrolling")
    _, token = enrollment_token_create(actor=None, host=host)
    agent_enroll(token=token, inventory={}, agent_version="test")
    host.refresh_from_db()
    assert host.state == "enrolling"  # out of placement
    node = Node(host)
    node.backend.set_diagnostics("fail", errors=["Diagnostic: PCIe bandwidth test failed on GPU 4"], times=1)
    assert _step(FAULT, node) == ["run_diagnostics"]
    first = Repair.objects.get(host=host, attempt=1)
    assert (first.kind, first.action, first.status) == ("acceptance", "none", "failed")
    assert Host.objects.get(pk=host.pk).state == "enrolling"
    assert _step(FAULT + dt.timedelta(seconds=15), node) == ["run_diagnostics"]
    second = Repair.objects.get(host=host, attempt=2)
    assert second.status == "passed" and second.result["passed"] is True
    host.refresh_from_db()
    assert (host.state, host.state_reason) == ("available", f"health: return-to-service check passed (acceptance "
                                                            f"{second.pk})")


def test_a_gpu_fault_during_a_host_reboot_gets_its_own_repair_once_the_reboot_passed(world):
    """An XID 48 on GPU 5 and an XID 79 on GPU 6 while the host's reboot (XID 79 on GPU 2) is open open no repair of
    their own; the reboot's check looks at GPU 2 only, so its pass opens a reset of GPUs 5 and 6, whose checks
    return them and end their incidents (was: they stayed faulty, their incidents open, with no repair)."""
    host = gpu_host(gpus=8)
    reboot = Repair.objects.get(pk=_event(host, {"kind": "xid", "xid": 79, "gpu_index": 2}, FAULT)["applied"]["repair"])
    b48 = _event(host, {"kind": "xid", "xid": 48, "gpu_index": 5}, FAULT + dt.timedelta(seconds=5))
    b79 = _event(host, {"kind": "xid", "xid": 79, "gpu_index": 6}, FAULT + dt.timedelta(seconds=6))
    assert "repair" not in b48["applied"] and "repair" not in b79["applied"]
    node, at = Node(host), FAULT + dt.timedelta(seconds=15)
    assert _step(at, node) == ["reboot_host"]
    at += dt.timedelta(seconds=15)
    assert _step(at, node) == ["run_diagnostics"]
    reboot.refresh_from_db()
    assert reboot.status == "passed"
    # the host is back in service; the GPUs the other events left faulty each get a reset (XID 79's too: the
    # host was just rebooted), not a second reboot that would wait on the tenants placed there meanwhile
    assert Host.objects.get(pk=host.pk).state == "available"
    resets = Repair.objects.filter(host=host).exclude(pk=reboot.pk).order_by("gpu__index")
    assert [(r.action, r.status, r.gpu.index, str(r.event_id)) for r in resets] == [
        ("reset_gpu", "waiting", 5, b48["id"]), ("reset_gpu", "waiting", 6, b79["id"])]
    at += dt.timedelta(seconds=15)
    assert _step(at, node) == ["reset_gpu", "reset_gpu"]
    at += dt.timedelta(seconds=15)
    assert _step(at, node) == ["run_diagnostics", "run_diagnostics"]
    assert {r.status for r in Repair.objects.filter(host=host)} == {"passed"}
    assert set(Gpu.objects.filter(host=host).values_list("health", flat=True)) == {"ok"}
    assert not Incident.objects.filter(host=host, end__isnull=True).exists()
    assert _step(at + dt.timedelta(seconds=15), node) == []  # nothing opens twice
