"""Health API: the agent's report (agent credential, 400 for an unknown GPU, idempotent re-send), the staff
classification and preview, the tenant's scoped list, and the whole path from an XID 79 on a GPU that runs a
tenant instance to the GPU leaving placement, a provider-fault incident and the downtime and SLA credit on the
invoice preview."""

from __future__ import annotations

from decimal import Decimal

import pytest
import time_machine
from rest_framework.test import APIClient

from apps.billing.services import downtime_sync, invoice_run_execute, usage_record_collect
from apps.billing.skus import sku_for
from apps.compute.models import Instance
from apps.health.models import HealthEvent
from apps.inventory.models import Incident
from apps.inventory.services.agent import agent_enroll, enrollment_token_create
from apps.inventory.services.hosts import gpu_mark_healthy
from apps.tenancy.models import OrgRole
from tests.billing.conftest import book, utc
from tests.compute.conftest import create_body, drive, gpu_host
from tests.compute.test_instance_lifecycle import _agent_complete
from tests.inventory.helpers import make_host
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for

pytestmark = pytest.mark.django_db


def _agent(host) -> APIClient:
    _, token = enrollment_token_create(actor=None, host=host)
    _, credential = agent_enroll(token=token, inventory={}, agent_version="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {credential}")
    return client


def _staff():
    return client_for(token_for(make_user("ops@health.test", staff_role="operator"), staff=True))


def test_agent_reports_events_unknown_gpu_is_problem_and_resend_is_idempotent():
    host = make_host("ha1", gpus=1)
    agent = _agent(host)
    body = {"kind": "xid", "xid": 48, "gpu_index": 0, "dedup_key": "boot1:seq7"}
    r = agent.post("/api/v1/agent/health-events", body, format="json")
    assert r.status_code == 201, r.content
    assert (r.json()["classification"], r.json()["applied"]["actions"]) == (
        "gpu_memory_uncorrectable",
        ["gpu_mark_faulty"],
    )
    again = agent.post("/api/v1/agent/health-events", body, format="json")
    assert (again.status_code, again.json()["id"], again.json()["created"]) == (200, r.json()["id"], False)
    bad = agent.post("/api/v1/agent/health-events", {"kind": "xid", "xid": 79, "gpu_index": 3}, format="json")
    assert bad.status_code == 400 and bad["Content-Type"].startswith("application/problem+json")
    assert (bad.json()["code"], list(bad.json()["errors"])) == ("health_gpu_unknown", ["gpu_index"])
    unknown = agent.post("/api/v1/agent/health-events", {"kind": "thermal", "gpu": 0}, format="json")
    assert unknown.status_code == 400 and unknown.json()["errors"] == {"gpu": ["Unknown field."]}
    assert HealthEvent.objects.count() == 1 and Incident.objects.count() == 1


def test_staff_classification_and_preview_write_nothing():
    host = make_host("ha2", gpus=1)
    staff = _staff()
    table = staff.get("/api/v1/health/classification").json()
    assert table["version"] >= 1
    row = next(r for r in table["rows"] if r["id"] == "xid-79")
    assert (row["class"], row["provider_at_fault"], row["needs_return_to_service"]) == (
        "gpu_lost",
        True,
        True,
    )
    assert "XID 79" in row["source"]
    r = staff.post(
        "/api/v1/health/preview",
        {"host": str(host.pk), "kind": "xid", "xid": 79, "gpu_index": 0},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert (r.json()["actions"], r.json()["pending"]) == (["gpu_mark_faulty", "host_cordon"], ["reboot_host"])
    host.refresh_from_db()
    assert (host.state, host.gpus.get().health, HealthEvent.objects.count(), Incident.objects.count()) == (
        "available",
        "ok",
        0,
        0,
    )
    bad = staff.post(
        "/api/v1/health/preview",
        {"host": str(host.pk), "kind": "xid", "xid": 79, "gpu_index": 4},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["code"] == "health_gpu_unknown"


def _create(world, host, at) -> Instance:
    with time_machine.travel(at, tick=False):
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
        assert resp.status_code == 202, resp.content
        inst = Instance.objects.get(pk=resp.data["instance"]["id"])
        op = drive(resp.data["operation"]["id"])
        for _ in range(5):  # the node agent activates the NVSwitch partition
            if op.status != "running":
                break
            part = Instance.objects.get(pk=inst.pk).devices.get("partition")
            _agent_complete(
                host, list(host.agent_commands.filter(status="queued")), {"active_partitions": [part]}
            )
            op = drive(op.pk)
        assert op.status == "succeeded"
    return inst


def _delete(world, host, inst, at) -> None:
    with time_machine.travel(at, tick=False):
        op = drive(world.client_a.delete(f"/api/v1/instances/{inst.pk}/").data["operation"]["id"])
        for _ in range(5):
            if op.status != "running":
                break
            for cmd in host.agent_commands.filter(status="queued"):
                _agent_complete(host, [cmd], {"active_partitions": []} if "partition" in cmd.kind else None)
            op = drive(op.pk)
        assert op.status == "succeeded"


def test_xid79_under_a_tenant_instance_cordons_opens_incident_and_credits(world, tiers):  # noqa: F811
    """Instance on from 1 June 00:00 to 11 June 00:00 2026 (240 h) on a standard-tier org at $2.00/h. XID 79 on
    its GPU at 5 June 00:00; staff return the GPU to service at 09:00: 9 h provider-fault downtime, so 231 h are
    charged ($462.00) and uptime below 99 % earns the standard tier's 10 % credit ($46.20) on the July invoice."""
    host = gpu_host(gpus=8)
    agent = _agent(host)
    book(utc(2026, 1, 1), {(sku_for("flavor", name="g1-h100"), "standard", "on_demand"): "2.00"})
    inst = _create(world, host, utc(2026, 6, 1))
    from apps.scheduling.selectors import allocation_list_for_consumer

    gpu = next(a.gpu for a in allocation_list_for_consumer(inst.pk) if a.gpu is not None)

    with time_machine.travel(utc(2026, 6, 5), tick=False):
        r = agent.post(
            "/api/v1/agent/health-events",
            {"kind": "xid", "xid": 79, "gpu_index": gpu.index, "observed_at": "2026-06-05T00:00:00Z"},
            format="json",
        )
        assert r.status_code == 201, r.content
        gpu.refresh_from_db()
        host.refresh_from_db()
        assert (gpu.health, host.state) == ("faulty", "cordoned")  # the GPU (and host) leave placement
        incident = Incident.objects.get(gpu=gpu)
        assert (incident.start, incident.end, incident.provider_at_fault) == (utc(2026, 6, 5), None, True)
        # no new placement lands on the host: the only GPU host of the world
        again = world.client_a.post(
            "/api/v1/instances/", create_body(world, world.gpu1, name="vm-2"), format="json"
        )
        op = drive(again.data["operation"]["id"]) if again.status_code == 202 else None
        assert again.status_code != 202 or op.status == "failed", again.content
        # the tenant sees the event against its instance; another tenant sees nothing
        mine = world.client_a.get("/api/v1/health-events").json()["results"]
        assert [
            (e["resource_id"], e["kind"], e["xid"], e["classification"], e["provider_at_fault"]) for e in mine
        ] == [(str(inst.pk), "xid", 79, "gpu_lost", True)]
        assert world.client_b.get("/api/v1/health-events").json()["results"] == []
        assert (
            world.client_b.get("/api/v1/health-events", {"project": str(world.project_a.pk)}).status_code
            == 400
        )
    with time_machine.travel(utc(2026, 6, 5, 9), tick=False):
        gpu_mark_healthy(actor=None, gpu=gpu, reason="reseated, field diag passed")
    _delete(world, host, inst, utc(2026, 6, 11))

    owner = make_user("owner@compute-a.test")
    member(owner, world.org_a, OrgRole.OWNER)
    billing = client_for(token_for(owner, organization=world.org_a))
    with time_machine.travel(utc(2026, 6, 20), tick=False):
        usage_record_collect(window_start=utc(2026, 6, 1), window_end=utc(2026, 6, 20))
        downtime_sync(
            window_start=utc(2026, 6, 1), window_end=utc(2026, 6, 20)
        )  # as an invoice run's prepare does
        body = billing.get("/api/v1/invoices/preview/", {"organization": str(world.org_a.pk)}).json()
        (line,) = [ln for ln in body["lines"] if ln["resource_id"] == str(inst.pk)]
        assert (Decimal(line["billed_seconds"]), line["amount"]) == (Decimal(231 * 3600), "462.00")
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
    with time_machine.travel(utc(2026, 7, 10), tick=False):
        body = billing.get("/api/v1/invoices/preview/", {"organization": str(world.org_a.pk)}).json()
        assert [ln["amount"] for ln in body["lines"] if ln["kind"] == "sla_credit"] == ["-46.20"]


def test_staff_list_every_health_event_filtered_by_host_kind_and_class_tenants_get_404(django_assert_max_num_queries):
    """The admin portal's health events: any staff role reads the fleet's events with where, what, when, the
    class the rules gave them and what ingest did; filters narrow by host, GPU, kind, class and time."""
    h1, h2 = make_host("hs1", gpus=2), make_host("hs2", gpus=1)
    a1, a2 = _agent(h1), _agent(h2)
    assert a1.post("/api/v1/agent/health-events", {"kind": "xid", "xid": 48, "gpu_index": 1, "dedup_key": "k1",
                                                   "observed_at": "2026-12-01T10:00:00Z"}, format="json").status_code == 201
    assert a1.post("/api/v1/agent/health-events", {"kind": "thermal", "gpu_index": 0, "dedup_key": "k2",
                                                   "observed_at": "2026-12-01T11:00:00Z"}, format="json").status_code == 201
    assert a2.post("/api/v1/agent/health-events", {"kind": "xid", "xid": 48, "gpu_index": 0, "dedup_key": "k3",
                                                   "observed_at": "2026-12-01T12:00:00Z"}, format="json").status_code == 201
    support = client_for(token_for(make_user("support@health.test", staff_role="support"), staff=True))
    with django_assert_max_num_queries(8):
        r = support.get("/api/v1/health/events/")
    assert r.status_code == 200, r.content
    rows = r.json()["results"]
    assert [(e["host"], e["gpu_index"], e["kind"]) for e in rows] == [("hs2", 0, "xid"), ("hs1", 0, "thermal"),
                                                                      ("hs1", 1, "xid")]
    dbe = rows[2]
    assert (dbe["xid"], dbe["classification"], dbe["actions"], dbe["source"]) == (
        48, "gpu_memory_uncorrectable", ["gpu_mark_faulty"], "agent")
    assert dbe["incident"] and dbe["impact_count"] == 0 and dbe["needs_return_to_service"] is True

    def hosts(**q):
        got = support.get("/api/v1/health/events/", q)
        assert got.status_code == 200, got.content
        return [(e["host"], e["kind"]) for e in got.json()["results"]]

    assert hosts(host="hs1") == [("hs1", "thermal"), ("hs1", "xid")]
    assert hosts(host_id=str(h2.pk)) == [("hs2", "xid")]
    assert hosts(kind="xid") == [("hs2", "xid"), ("hs1", "xid")]
    assert hosts(classification="gpu_memory_uncorrectable", host="hs1", gpu_index=1) == [("hs1", "xid")]
    assert hosts(observed_after="2026-12-01T10:30:00Z", observed_before="2026-12-01T12:00:00Z") == [("hs1", "thermal")]
    bad = support.get("/api/v1/health/events/", {"kind": "meltdown"})
    assert bad.status_code == 400 and "kind" in bad.json()["errors"]
    assert support.get(f"/api/v1/health/events/{dbe['id']}/").json()["host"] == "hs1"
    owner, org = make_user("owner@health.test"), make_org("healthy")
    member(owner, org, OrgRole.OWNER)
    assert client_for(token_for(owner, organization=org)).get("/api/v1/health/events/").status_code == 404


def test_a_host_level_kind_naming_a_gpu_is_refused_by_the_preview_and_the_agent_report():
    """heartbeat_lost (and every kind whose classification rows act on the host, none on one GPU) is about the
    host: a gpu_index or gpu_uuid on it is a 400 `health_invalid_event` naming the field, and nothing is recorded;
    without one it is accepted."""
    host = make_host("ha8", gpus=1)
    gpu_uuid = host.gpus.get().uuid
    staff, agent = _staff(), _agent(host)
    for extra, field in (({"gpu_index": 0}, "gpu_index"), ({"gpu_uuid": gpu_uuid}, "gpu_uuid")):
        for kind in ("heartbeat_lost", "fabric_manager_down"):
            r = staff.post("/api/v1/health/preview", {"host": str(host.pk), "kind": kind, **extra}, format="json")
            assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json"), r.content
            assert (r.json()["code"], list(r.json()["errors"])) == ("health_invalid_event", [field])
            r = agent.post("/api/v1/agent/health-events", {"kind": kind, **extra}, format="json")
            assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (400, "health_invalid_event",
                                                                                  [field]), r.content
    assert HealthEvent.objects.count() == 0 and Incident.objects.count() == 0
    r = staff.post("/api/v1/health/preview", {"host": str(host.pk), "kind": "heartbeat_lost"}, format="json")
    assert (r.status_code, r.json()["rule"]["id"]) == (200, "heartbeat-lost"), r.content
    ok = staff.post("/api/v1/health/preview", {"host": str(host.pk), "kind": "thermal", "gpu_index": 0},
                    format="json")
    assert ok.status_code == 200, ok.content  # a GPU kind still takes its GPU


def test_an_observed_at_near_year_one_is_a_400_problem_not_a_500():
    """A threshold row's window ends at observed_at; a time within that window of year 1 cannot start it."""
    host = make_host("ha9", gpus=1)
    body = {"kind": "ecc_sbe", "gpu_index": 0, "observed_at": "0001-01-01T00:00:00Z"}
    for client, url in ((_staff(), "/api/v1/health/preview"), (_agent(host), "/api/v1/agent/health-events")):
        r = client.post(url, {**({"host": str(host.pk)} if "preview" in url else {}), **body}, format="json")
        assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json"), r.content
        assert (r.json()["code"], list(r.json()["errors"])) == ("health_invalid_event", ["observed_at"])
    assert HealthEvent.objects.count() == 0
