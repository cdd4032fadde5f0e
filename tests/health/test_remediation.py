"""Remediation end to end through the fake backends, with explicit times: an XID 79 reported by the node agent
on the GPU of a tenant's VM → class gpu_lost → the GPU and host leave placement, a provider-fault incident opens →
a remediation under the project's consent mode → (auto, after the checkpoint notice's deadline) the VM is
re-created on the other host with the same ports, addresses, security group and InfiniBand partition, a new
allocation, the old one released → the downtime ends with the old allocation and the SLA credit is on the invoice
preview. `propose` waits for the tenant's approval (another tenant gets 404); `off` never moves."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import time_machine
from django.test import Client

from apps.billing.services import downtime_sync, invoice_run_execute, usage_record_collect
from apps.billing.skus import sku_for
from apps.compute.models import Flavor, Instance
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance
from apps.inventory.models import HcaPort, Incident
from apps.networking import services as net
from apps.networking.models import IbPartitionMember, Port
from apps.operations.models import Operation
from apps.reservations.models import Notification
from apps.scheduling.models import Allocation
from apps.tenancy.models import OrgRole, Quota
from tests.billing.conftest import book, utc
from tests.compute.conftest import drive, gpu_host
from tests.compute.test_instance_lifecycle import _agent_complete
from tests.scheduling import fleet
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .test_api import _agent

pytestmark = pytest.mark.django_db
T0 = utc(2026, 6, 1)
FAULT = utc(2026, 6, 5)


@pytest.fixture
def setup(world, tiers):  # noqa: F811
    """Two HGX hosts cabled to one InfiniBand fabric; tenant A's subnet, security group and partition; a
    whole-host 8-GPU flavor at $16.00/h on the standard tier; webhook-free org with a billing e-mail."""
    fabric = fleet.ib_fabric("ib-heal")
    net.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x0100, last_pkey=0x01FF)
    vpc = net.vpc_create(actor=world.member_a, project=world.project_a, name="main", cidr="10.10.0.0/16")
    subnet = net.subnet_create(actor=world.member_a, vpc=vpc, name="nodes", cidr="10.10.1.0/24")
    sg = net.security_group_create(actor=world.member_a, vpc=vpc, name="ssh")
    part = net.ib_partition_create(actor=world.member_a, project=world.project_a, fabric=fabric, name="train")
    su, leaves = fleet.su_with_leaves("su-heal", rails=2, fabric=fabric)
    hosts = [gpu_host(gpus=8, su=su) for _ in range(2)]
    for h in hosts:
        fleet.cable(h, leaves, fabric=fabric)
    Quota.objects.update_or_create(
        organization=world.org_a, project=None, resource="gpus", defaults={"limit": 16}
    )
    h8 = Flavor.objects.create(
        name="h100-8x", vcpus=96, memory_mib=1024 * 512, gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=8
    )
    book(utc(2026, 1, 1), {(sku_for("flavor", name="h100-8x"), "standard", "on_demand"): "16.00"})
    world.org_a.billing_email = "billing@compute-a.test"
    world.org_a.save(update_fields=["billing_email"])
    return type("S", (), dict(hosts=hosts, subnet=subnet, sg=sg, part=part, flavor=h8))


def _finish(op_id, hosts) -> Operation:
    op = drive(op_id)
    for _ in range(6):
        if op.status != "running":
            break
        for h in hosts:
            queued = list(h.agent_commands.filter(status="queued"))
            parts = [c.payload.get("partition_id") for c in queued if c.kind == "activate_partition"]
            _agent_complete(h, queued, {"active_partitions": parts, "health": "ok"} if parts else None)
        op = drive(op_id)
    return op


def _launch(world, s, name="train-0") -> Instance:
    with time_machine.travel(T0, tick=False):
        body = {
            "project": str(world.project_a.pk),
            "name": name,
            "flavor": str(s.flavor.pk),
            "image": str(world.image.pk),
            "subnet_id": str(s.subnet.pk),
            "security_group_ids": [str(s.sg.pk)],
            "ib_partition_id": str(s.part.pk),
        }
        r = world.client_a.post("/api/v1/instances/", body, format="json")
        assert r.status_code == 202, r.content
        op = _finish(r.data["operation"]["id"], s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
    return Instance.objects.select_related("host").get(pk=r.data["instance"]["id"])


def _xid79(host, at=FAULT):
    with time_machine.travel(at, tick=False):
        r = _agent(host).post(
            "/api/v1/agent/health-events",
            {"kind": "xid", "xid": 79, "gpu_index": 3, "observed_at": at.isoformat()},
            format="json",
        )
        assert r.status_code == 201, r.content
    return r.json()


def _policy(world, mode, notice=600):
    owner = make_user(f"owner-{mode}@compute-a.test")
    member(owner, world.org_a, OrgRole.OWNER)
    c = client_for(token_for(owner, organization=world.org_a))
    r = c.put(
        f"/api/v1/projects/{world.project_a.pk}/remediation-policy",
        {"consent_mode": mode, "notice_seconds": notice},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json() == {"project": str(world.project_a.pk), "consent_mode": mode, "notice_seconds": notice}
    return c


def _network_view(inst_id):
    port = Port.objects.prefetch_related("fixed_ips", "security_groups").get(instance_id=inst_id)
    return (
        port.pk,
        port.mac_address,
        sorted(a.address for a in port.fixed_ips.all()),
        sorted(str(g.pk) for g in port.security_groups.all()),
    )


def test_auto_moves_after_the_checkpoint_deadline_keeps_networks_and_credits(world, setup):
    s = setup
    owner = _policy(world, "auto", notice=3 * 3600)
    inst = _launch(world, s)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    before_net = _network_view(inst.pk)
    old_guids = {p.port_guid for p in HcaPort.objects.filter(host=old_host)}
    assert set(IbPartitionMember.objects.filter(instance_id=inst.pk).values_list("guid", flat=True)) == old_guids

    body = _xid79(old_host)
    (rem_id,) = body["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.consent_mode, rem.deadline_at) == ("notice", "auto", FAULT + dt.timedelta(hours=3))
    # the checkpoint notice went out (e-mail to the billing address) with the deadline
    (notice,) = Notification.objects.filter(event="remediation.notice")
    assert notice.payload["data"]["deadline_at"] == "2026-06-05T03:00:00+00:00"
    assert notice.payload["data"]["instance"] == str(inst.pk)
    # the tenant sees it; another tenant does not
    mine = world.client_a.get("/api/v1/remediations").json()["results"]
    assert [(r["id"], r["status"], r["deadline_at"]) for r in mine] == [
        (rem_id, "notice", "2026-06-05T03:00:00Z")
    ]
    assert world.client_b.get("/api/v1/remediations").json()["results"] == []
    assert world.client_b.get(f"/api/v1/remediations/{rem_id}").status_code == 404
    # the instance's own API object carries the notice, for tooling in the guest that polls it
    maintenance = {
        "remediation": rem_id,
        "status": "notice",
        "consent_mode": "auto",
        "deadline_at": "2026-06-05T03:00:00Z",
        "reason": "",
    }
    assert world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["maintenance"] == maintenance
    listed = world.client_a.get("/api/v1/instances/").json()["results"]
    assert [i["maintenance"] for i in listed] == [maintenance]

    with time_machine.travel(FAULT + dt.timedelta(hours=3, seconds=-1), tick=False):
        assert remediations_advance() == {"started": 0, "finished": 0}  # not before the deadline
    with time_machine.travel(FAULT + dt.timedelta(hours=3), tick=False):
        assert remediations_advance()["started"] == 1
        assert remediations_advance() == {"started": 0, "finished": 0}  # idempotent
        rem.refresh_from_db()
        assert rem.status == "running"
        op = _finish(rem.operation_id, s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        assert op.kind == "instance.recreate" and op.steps_done[:2] == ["claim_new", "release_old"]
        assert remediations_advance() == {"started": 0, "finished": 1}
    rem.refresh_from_db()
    inst.refresh_from_db()
    assert (rem.status, rem.to_host_id, inst.status, inst.host_id) == ("succeeded", new_host.pk, "active", new_host.pk)
    assert Instance.objects.filter(project=world.project_a).count() == 1  # the same VM, not a second one
    # same port, MAC, address and security group; the partition now holds the new host's GUIDs only
    assert _network_view(inst.pk) == before_net
    new_guids = {p.port_guid for p in HcaPort.objects.filter(host=new_host)}
    assert set(IbPartitionMember.objects.filter(instance_id=inst.pk).values_list("guid", flat=True)) == new_guids
    # the old allocation ended at the move, a new one runs on the new host
    moved_at = FAULT + dt.timedelta(hours=3)
    live = Allocation.objects.filter(consumer_id=inst.pk, period__upper_inf=True)
    assert {a.host_id for a in live} == {new_host.pk}
    old = Allocation.objects.filter(consumer_id=inst.pk, host=old_host)
    assert old.exists() and {a.period.upper for a in old} == {moved_at}
    assert Incident.objects.filter(host=old_host, end__isnull=True, provider_at_fault=True).exists()
    assert world.client_a.get(f"/api/v1/remediations/{rem_id}").json()["status"] == "succeeded"
    assert world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["maintenance"] is None
    # /metrics: the time to drain runs from the event's record to the VM re-created (the 3 h notice included)
    from tests.core.test_business_metrics import scrape

    m = scrape(Client())
    assert (m[("gpucloud_health_time_to_drain_seconds_count", ())],
            m[("gpucloud_health_time_to_drain_seconds_sum", ())],
            m[("gpucloud_health_time_to_drain_seconds_bucket", (("le", "3600.0"),))],
            m[("gpucloud_health_time_to_drain_seconds_bucket", (("le", "14400.0"),))]) == (1, 3 * 3600.0, 0, 1)

    # billing: the 3 h on the failed GPU (fault to move) are provider-fault downtime, not charged; uptime
    # 237 / 240 h = 98.75 % is below the standard tier's 99 %: 10 % of June's $3,792.00 is credited
    with time_machine.travel(utc(2026, 6, 11), tick=False):
        op = world.client_a.delete(f"/api/v1/instances/{inst.pk}/").data["operation"]["id"]
        assert _finish(op, s.hosts).status == "succeeded"
    with time_machine.travel(utc(2026, 6, 20), tick=False):
        usage_record_collect(window_start=T0, window_end=utc(2026, 6, 20))
        downtime_sync(window_start=T0, window_end=utc(2026, 6, 20))
        body = owner.get("/api/v1/invoices/preview/", {"organization": str(world.org_a.pk)}).json()
        billed = sum(Decimal(ln["billed_seconds"]) for ln in body["lines"] if ln["resource_id"] == str(inst.pk))
        assert billed == Decimal(237 * 3600)
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
    with time_machine.travel(utc(2026, 7, 10), tick=False):
        body = owner.get("/api/v1/invoices/preview/", {"organization": str(world.org_a.pk)}).json()
        assert [ln["amount"] for ln in body["lines"] if ln["kind"] == "sla_credit"] == ["-379.20"]


def test_propose_waits_for_approval_and_another_tenant_gets_404(world, setup):
    s = setup
    _policy(world, "propose")
    inst = _launch(world, s)
    old_host = inst.host
    (rem_id,) = _xid79(old_host)["applied"]["remediations"]
    with time_machine.travel(FAULT + dt.timedelta(minutes=1), tick=False):  # a second fault on the same VM
        again = _agent(old_host).post(
            "/api/v1/agent/health-events", {"kind": "xid", "xid": 48, "gpu_index": 5}, format="json"
        )
        assert again.status_code == 201 and again.json()["applied"]["remediations"] == []  # still one
    with time_machine.travel(FAULT + dt.timedelta(days=2), tick=False):
        assert remediations_advance() == {"started": 0, "finished": 0}  # never without approval
        assert Instance.objects.get(pk=inst.pk).host_id == old_host.pk
        assert world.client_b.post(f"/api/v1/remediations/{rem_id}/approve").status_code == 404
        assert Remediation.objects.get(pk=rem_id).status == "proposed"
        r = world.client_a.post(f"/api/v1/remediations/{rem_id}/approve")
        assert r.status_code == 200, r.content
        assert r.json()["status"] == "running"
        again = world.client_a.post(f"/api/v1/remediations/{rem_id}/approve")
        assert again.status_code == 409 and again.json()["code"] == "invalid_state"
        op = _finish(r.json()["operation"], s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        remediations_advance()
    inst.refresh_from_db()
    assert inst.host_id != old_host.pk and inst.status == "active"
    assert Remediation.objects.get(pk=rem_id).status == "succeeded"


def test_off_never_moves_and_tells_the_tenant(world, setup):
    s = setup
    _policy(world, "off")
    inst = _launch(world, s)
    (rem_id,) = _xid79(inst.host)["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.reason) == ("held", "consent mode off: never moved")
    assert Notification.objects.filter(event="remediation.held").count() == 1
    marked = world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["maintenance"]
    assert (marked["status"], marked["reason"]) == ("held", "consent mode off: never moved")
    with time_machine.travel(FAULT + dt.timedelta(days=3), tick=False):
        assert remediations_advance() == {"started": 0, "finished": 0}
        assert world.client_a.post(f"/api/v1/remediations/{rem_id}/approve").status_code == 409
    assert Instance.objects.get(pk=inst.pk).host_id == inst.host_id
    assert not Operation.objects.filter(kind="instance.recreate").exists()


def test_policy_needs_a_project_admin_and_another_tenants_project_is_404(world, setup):
    r = world.client_a.put(
        f"/api/v1/projects/{world.project_a.pk}/remediation-policy", {"consent_mode": "off"}, format="json"
    )
    assert r.status_code == 403
    got = world.client_a.get(f"/api/v1/projects/{world.project_a.pk}/remediation-policy").json()
    assert got["consent_mode"] == "auto"
    assert world.client_b.get(f"/api/v1/projects/{world.project_a.pk}/remediation-policy").status_code == 404
    bad = _policy(world, "propose").put(
        f"/api/v1/projects/{world.project_a.pk}/remediation-policy", {"consent_mode": "sometimes"}, format="json"
    )
    assert bad.status_code == 400 and bad["Content-Type"].startswith("application/problem+json")


def test_staff_see_what_runs_on_a_host_and_the_vms_health_moves_off_it(world, setup):
    s = setup
    _policy(world, "auto", notice=600)
    inst = _launch(world, s)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    staff = client_for(token_for(make_user("ops@workloads.test", staff_role="operator"), staff=True))
    url = f"/api/v1/health/hosts/{old_host.pk}/workloads/"

    def view(at):
        with time_machine.travel(at, tick=False):
            body = staff.get(url).json()
        return ([(w["kind"], w["name"], w["status"], w["organization"]["slug"], w["project"]["slug"], w["gpus"])
                 for w in body["workloads"]],
                [(r["name"], r["status"], r["organization"]["slug"], r["to_host"]) for r in body["remediations"]])

    org, project = world.org_a.slug, world.project_a.slug
    assert view(FAULT) == ([("instance", "train-0", "active", org, project, list(range(8)))], [])
    _xid79(old_host)
    assert view(FAULT) == ([("instance", "train-0", "active", org, project, list(range(8)))],
                           [("train-0", "notice", org, None)])
    with time_machine.travel(FAULT + dt.timedelta(seconds=600), tick=False):
        assert remediations_advance()["started"] == 1
        rem = Remediation.objects.get(resource_id=inst.pk)
        assert _finish(rem.operation_id, s.hosts).status == "succeeded"
        assert remediations_advance()["finished"] == 1
    after = FAULT + dt.timedelta(seconds=601)
    assert view(after) == ([], [("train-0", "succeeded", org, new_host.name)])
    with time_machine.travel(after, tick=False):
        moved = staff.get(f"/api/v1/health/hosts/{new_host.pk}/workloads/").json()
        assert [w["name"] for w in moved["workloads"]] == ["train-0"] and moved["remediations"] == []
        # a tenant (even the instance's own) gets 404, as for a host that does not exist
        assert world.client_a.get(url).status_code == 404
        assert staff.get(f"/api/v1/health/hosts/{world.project_a.pk}/workloads/").status_code == 404


def test_a_claim_that_finds_no_capacity_leaves_the_vm_where_it_runs_and_waits(world, setup):
    """The re-create claims its new capacity before it leaves the old host: when the capacity it was started on
    is gone at the claim (here staff cordon the only healthy host in between), the VM keeps running on its old
    host with its allocation, nothing new is held, and the remediation waits for capacity again instead of
    leaving a hostless VM in `error`."""
    from apps.inventory.services.hosts import host_cordon, host_mark_available

    s = setup
    _policy(world, "auto", notice=60)
    inst = _launch(world, s)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    (rem_id,) = _xid79(old_host)["applied"]["remediations"]
    old_live = set(Allocation.objects.filter(consumer_id=inst.pk, period__upper_inf=True).values_list("pk", flat=True))
    at = FAULT + dt.timedelta(seconds=60)
    with time_machine.travel(at, tick=False):
        assert remediations_advance()["started"] == 1
        op_id = Remediation.objects.get(pk=rem_id).operation_id
        host_cordon(actor=None, host=new_host, reason="staff took it for a test")
        op = _finish(op_id, s.hosts)
        assert (op.status, op.error_code) == ("failed", "capacity_unavailable"), op.error_detail
        inst.refresh_from_db()
        assert (inst.status, inst.host_id) == ("active", old_host.pk)
        live = set(Allocation.objects.filter(consumer_id=inst.pk, period__upper_inf=True).values_list("pk", flat=True))
        assert live == old_live
        assert remediations_advance()["started"] == 0  # back to waiting, not started again onto nothing
        rem = Remediation.objects.get(pk=rem_id)
        assert rem.status == "approved" and rem.reason.startswith("waiting for capacity"), rem.reason
    with time_machine.travel(at + dt.timedelta(minutes=5), tick=False):
        host_mark_available(actor=None, host=new_host, reason="back")
        assert remediations_advance()["started"] == 1
        rem.refresh_from_db()
        assert _finish(rem.operation_id, s.hosts).status == "succeeded"
        remediations_advance()
    rem.refresh_from_db()
    inst.refresh_from_db()
    assert (rem.status, inst.status, inst.host_id) == ("succeeded", "active", new_host.pk)
    live = Allocation.objects.filter(consumer_id=inst.pk, period__upper_inf=True)
    assert {a.host_id for a in live} == {new_host.pk}


def test_a_spot_vm_on_the_failed_gpu_is_preempted_at_once_not_moved(world, setup):
    """Spot is stopped, never moved: the fault interrupts it through the spot market's preemption with no grace
    (the owner's spot.preemption_notice), whatever the consent mode, and the reservations beat deletes it, which
    releases its allocation on the failed host."""
    from apps.reservations.models import InstanceTerms
    from apps.reservations.services.spot import spot_preempt_due

    s = setup
    _policy(world, "propose")
    inst = _launch(world, s, name="spot-0")
    InstanceTerms.objects.create(instance=inst, project=world.project_a, market="spot")
    body = _xid79(inst.host)
    (rem_id,) = body["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.reason) == ("held", "spot: preempted now (the spot market's interruption), not moved")
    terms = InstanceTerms.objects.get(instance=inst)
    assert terms.interruption_at == FAULT and terms.interruption_reason.startswith("health: gpu_lost")
    (notice,) = Notification.objects.filter(event="spot.preemption_notice")
    assert notice.payload["data"]["instance"] == str(inst.pk)
    with time_machine.travel(FAULT + dt.timedelta(seconds=15), tick=False):
        assert spot_preempt_due() == 1
        inst.refresh_from_db()
        assert inst.status == "deleting"
        op = Operation.objects.filter(target_id=inst.pk, kind="instance.delete").get()
        assert _finish(op.pk, s.hosts).status == "succeeded"
        remediations_advance()
    assert Instance.objects.get(pk=inst.pk).status == "deleted"
    assert not Allocation.objects.filter(consumer_id=inst.pk, period__upper_inf=True).exists()
    assert Remediation.objects.filter(resource_id=inst.pk).count() == 1  # moved by nobody, recorded once

