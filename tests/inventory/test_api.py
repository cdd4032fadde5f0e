"""Staff inventory API: host conditions (audited, incidents), GPU faults, catalog, fleet import/export, commands."""
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.models import AuditEvent
from apps.identity.models import StaffRole, User
from apps.inventory.models import AgentCommand, Host, Incident
from tests.inventory.helpers import make_host
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for

pytestmark = pytest.mark.django_db
SAMPLE = (Path(__file__).resolve().parents[2] / "apps/inventory/fleets/sample.yaml").read_text()


@pytest.fixture
def ops():
    return client_for(token_for(make_user("ops@provider.test", staff_role=StaffRole.OPERATOR), staff=True))


@pytest.fixture
def support():
    return client_for(token_for(make_user("support@provider.test", staff_role=StaffRole.SUPPORT), staff=True))


@pytest.fixture
def tenant():
    org = make_org("acme")
    user = make_user("admin@acme.test")
    member(user, org, "admin")
    return client_for(token_for(user, organization=org))


def act(client, host, action, reason="rack power work", **extra):
    return client.post(f"/api/v1/hosts/{host.pk}/{action}/", {"reason": reason, **extra}, format="json")


def test_condition_cycle_records_reason_time_audit_and_incident(ops):
    host = make_host("h1", gpus=1)
    assert act(ops, host, "cordon").json()["state"] == "cordoned"
    assert act(ops, host, "drain").json()["state"] == "draining"
    body = act(ops, host, "mark-faulty", reason="PSU failure").json()
    assert (body["state"], body["state_reason"]) == ("faulty", "PSU failure") and body["state_changed_at"]
    incident = Incident.objects.get(host=host)
    assert incident.end is None and incident.provider_at_fault and incident.reason == "PSU failure"
    assert act(ops, host, "maintenance").json()["state"] == "maintenance"
    incident.refresh_from_db()
    assert incident.end is not None  # leaving faulty closes the incident
    assert act(ops, host, "mark-available", reason="repaired").json()["state"] == "available"
    assert list(AuditEvent.objects.filter(target_id=str(host.pk)).order_by("occurred_at" if hasattr(
        AuditEvent, "occurred_at") else "id").values_list("action", flat=True)) == [
        "inventory.host.cordon", "inventory.host.drain", "inventory.host.mark_faulty",
        "inventory.host.maintenance", "inventory.host.mark_available"]
    listed = ops.get("/api/v1/incidents/?host=h1").json()["results"]
    assert listed[0]["duration_s"] >= 0 and listed[0]["reason"] == "PSU failure"


def test_wrong_state_is_409_with_allowed_states_and_no_side_effect(ops):
    host = make_host("h1", state="maintenance")
    audits = AuditEvent.objects.count()
    resp = act(ops, host, "cordon")
    assert resp.status_code == 409
    assert resp.json()["code"] == "invalid_state" and resp.json()["allowed_states"] == ["available"]
    assert Host.objects.get(pk=host.pk).state == "maintenance" and AuditEvent.objects.count() == audits


def test_reason_is_required(ops):
    host = make_host("h1")
    resp = ops.post(f"/api/v1/hosts/{host.pk}/cordon/", {}, format="json")
    assert resp.status_code == 400 and Host.objects.get(pk=host.pk).state == "available"


def test_mark_faulty_not_provider_fault(ops):
    host = make_host("h1")
    act(ops, host, "mark-faulty", reason="customer firmware", provider_at_fault=False)
    assert Incident.objects.get(host=host).provider_at_fault is False


def test_gpu_fault_opens_and_closes_a_gpu_incident(ops):
    host = make_host("h1", gpus=2)
    gpu = host.gpus.get(index=1)
    assert ops.post(f"/api/v1/gpus/{gpu.pk}/mark-faulty/", {"reason": "XID 79"}, format="json").json()[
        "health"] == "faulty"
    assert Incident.objects.get(gpu=gpu).end is None
    ops.post(f"/api/v1/gpus/{gpu.pk}/mark-healthy/", {"reason": "reseated"}, format="json")
    assert Incident.objects.get(gpu=gpu).end is not None


def test_support_reads_but_cannot_act_and_tenants_see_nothing(support, tenant):
    host = make_host("h1")
    assert support.get("/api/v1/hosts/").status_code == 200
    assert act(support, host, "cordon").status_code == 403
    for path in ("/api/v1/hosts/", f"/api/v1/hosts/{host.pk}/", "/api/v1/gpus/", "/api/v1/fleet/export/"):
        resp = tenant.get(path)
        assert resp.status_code == 404 and "SER-h1" not in resp.content.decode()


def test_gpu_models_catalog_readable_by_tenants(tenant):
    body = tenant.get("/api/v1/gpu-models/").json()
    assert [m["key"] for m in body] == ["A100-SXM4-40GB", "A100-SXM4-80GB", "B200", "H100-NVL-94GB",
                                        "H100-SXM5-80GB", "H200-SXM-141GB", "L40S"]
    h100 = tenant.get("/api/v1/gpu-models/H100-SXM5-80GB/").json()
    assert {p["name"]: (p["id"], p["memory"], p["max"]) for p in h100["mig_profiles"]}["3g.40gb"] == (9, 4, 2)
    assert [p["gpus"] for p in h100["nvswitch_partitions"]][:3] == [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4],
                                                                     [5, 6, 7, 8]]
    assert "mig-guide-profiles" in h100["sources"] and h100["vgpu_backing"] == "sriov_vf"
    assert tenant.get("/api/v1/gpu-models/NOPE/").status_code == 404


def test_fleet_import_api_dry_run_then_apply_then_export(ops):
    dry = ops.post("/api/v1/fleet/import/", {"document": SAMPLE}, format="json").json()
    assert dry["dry_run"] and not dry["applied"] and dry["summary"]["created"]["host"] == 82
    assert Host.objects.count() == 0
    applied = ops.post("/api/v1/fleet/import/", {"document": SAMPLE, "dry_run": False}, format="json").json()
    assert applied["applied"] and Host.objects.count() == 82
    assert AuditEvent.objects.filter(action="inventory.fleet.import").count() == 1
    again = ops.post("/api/v1/fleet/import/", {"document": SAMPLE, "dry_run": False}, format="json").json()
    assert again["changes"] == [] and not again["applied"]
    exported = ops.get("/api/v1/fleet/export/").json()["document"]
    assert ops.post("/api/v1/fleet/import/", {"document": exported}, format="json").json()["changes"] == []


def test_fleet_import_api_invalid_is_400_with_lines(ops):
    resp = ops.post("/api/v1/fleet/import/", {"document": "version: 1\nzones: [{name: z, region: nowhere}]\n",
                                              "dry_run": False}, format="json")
    assert resp.status_code == 400 and resp.json()["code"] == "fleet_invalid"
    assert resp.json()["errors"]["document"] == ["line 2: zone z: unknown region 'nowhere'"]


def test_host_list_query_count_is_bounded(ops):
    for i in range(5):
        make_host(f"h{i}", gpus=2)
    ops.get("/api/v1/gpus/")  # warm-up: token last_used_at bookkeeping
    with CaptureQueriesContext(connection) as small:
        ops.get("/api/v1/gpus/")
    for i in range(5, 15):
        make_host(f"h{i}", gpus=2)
    with CaptureQueriesContext(connection) as big:
        assert len(ops.get("/api/v1/gpus/").json()["results"]) == 30
    assert len(big) == len(small), [q["sql"][:120] for q in big.captured_queries]


def test_agent_command_api_rejects_bad_layout_with_reasons(ops):
    host = make_host("h1", gpus=1, model="A100-SXM4-40GB", driver_version="470.82.01")
    resp = ops.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": "apply_mig_layout", "payload": {
        "gpu_index": 0, "layout": [{"profile": "4g.20gb"}, {"profile": "3g.20gb"}]}}, format="json")
    assert resp.status_code == 400 and resp.json()["code"] == "mig_layout_rejected"
    assert [r["code"] for r in resp.json()["rejections"]] == ["driver_too_old"]
    assert AgentCommand.objects.count() == 0
    ok = ops.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": "apply_mig_layout", "payload": {
        "gpu_index": 0, "layout": [{"profile": "3g.20gb"}, {"profile": "3g.20gb"}]}}, format="json")
    assert ok.status_code == 201 and [i["start"] for i in ok.json()["payload"]["layout"]] == [0, 4]


def test_fleet_import_accepts_a_raw_yaml_body(ops):
    resp = ops.generic("POST", "/api/v1/fleet/import/?dry_run=false", SAMPLE, content_type="application/yaml")
    assert resp.status_code == 200 and resp.json()["applied"] and Host.objects.count() == 82


def test_retire_is_terminal(ops):
    host = make_host("h1", state="maintenance")
    assert act(ops, host, "retire", reason="decommissioned").json()["state"] == "retired"
    assert act(ops, host, "mark-available").status_code == 409


def test_allowed_actions_follow_the_state_and_the_role(ops, support):
    host = make_host("allowed-h1")
    actions = lambda c: c.get(f"/api/v1/hosts/{host.pk}/").json()["allowed_actions"]  # noqa: E731
    assert actions(ops) == ["cordon", "drain", "maintenance", "mark-faulty", "retire"]
    assert act(ops, host, "cordon").json()["allowed_actions"] == ["drain", "maintenance", "mark-faulty",
                                                                  "mark-available", "retire"]
    assert act(ops, host, "mark-faulty").json()["allowed_actions"] == ["maintenance", "mark-available", "retire"]
    assert act(ops, host, "maintenance").status_code == 200   # one it listed is one it accepts
    assert actions(support) == []   # support reads, never writes
    reader = client_for(token_for(User.objects.get(email="ops@provider.test"), scope="read", staff=True))
    assert actions(reader) == []    # nor does an operator's read-scoped token
