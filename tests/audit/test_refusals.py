"""Refused attempts in the audit log: a signed-in caller's change refused with 403 (its role, staff role or token
scope does not allow it) is recorded as `api.request.refused`, in the organization it was about when the refusal
knows it, with the method, path and the refusal's code; what was refused changed nothing. Reads and refusals that
are not about permission (a 409 state conflict, invalid input) are not recorded."""
import pytest

from apps.audit.models import AuditEvent
from apps.identity.models import StaffRole
from apps.inventory.models import Host
from apps.tenancy.models import OrgRole
from tests.authz.matrix_inventory import make_host
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db
REFUSED = "api.request.refused"


def test_a_viewer_s_refused_create_is_in_its_organization_s_audit_log(db):
    org = make_org("acme")
    project = make_project(org, "web")
    owner, viewer = make_user("owner@acme.test"), make_user("viewer@acme.test")
    member(owner, org, OrgRole.OWNER)
    member(viewer, org, OrgRole.VIEWER)
    client = client_for(token_for(viewer, organization=org))
    r = client.post("/api/v1/vpcs/", {"project": str(project.pk), "name": "prod", "cidr": "10.0.0.0/16"},
                    format="json")
    assert r.status_code == 403, r.content
    [event] = AuditEvent.objects.filter(action=REFUSED)
    assert (event.actor_email, event.organization_id, event.target_id) == ("viewer@acme.test", org.pk, "/api/v1/vpcs/")
    assert event.after["method"] == "POST" and event.after["code"] == r.json()["code"]
    owner_view = client_for(token_for(owner, organization=org)).get("/api/v1/audit-events/", {"action": REFUSED})
    assert [e["actor_email"] for e in owner_view.json()["results"]] == ["viewer@acme.test"]


def test_a_billing_admin_s_refused_drain_and_supports_refused_change_are_recorded_and_change_nothing(db):
    host = make_host("refusal-h1", gpus=1)
    for role in (StaffRole.BILLING_ADMIN, StaffRole.SUPPORT):
        client = client_for(token_for(make_user(f"{role}@provider.test", staff_role=role), staff=True))
        r = client.post(f"/api/v1/hosts/{host.pk}/drain/", {"reason": "try"}, format="json")
        assert r.status_code == 403, r.content
    assert Host.objects.get(pk=host.pk).state == host.state
    events = AuditEvent.objects.filter(action=REFUSED).order_by("created_at")
    assert [(e.actor_email, e.actor_is_staff, e.after["path"]) for e in events] == [
        ("billing_admin@provider.test", True, f"/api/v1/hosts/{host.pk}/drain/"),
        ("support@provider.test", True, f"/api/v1/hosts/{host.pk}/drain/")]
    operator = client_for(token_for(make_user("op@provider.test", staff_role=StaffRole.OPERATOR), staff=True))
    listed = operator.get("/api/v1/audit-events/", {"action": REFUSED}).json()["results"]
    assert len(listed) == 2


def test_reads_and_state_conflicts_are_not_recorded_as_refusals(db):
    host = make_host("refusal-h2", gpus=1)
    operator = client_for(token_for(make_user("op@provider.test", staff_role=StaffRole.OPERATOR), staff=True))
    assert operator.post(f"/api/v1/hosts/{host.pk}/mark-available/", {"reason": "again"},
                         format="json").status_code in (200, 409)
    tenant = make_user("owner@acme.test")
    org = make_org("acme")
    member(tenant, org, OrgRole.OWNER)
    assert client_for(token_for(tenant, organization=org)).get("/api/v1/hosts/").status_code == 404
    assert not AuditEvent.objects.filter(action=REFUSED).exists()


def test_a_viewer_s_launch_check_is_an_answer_not_a_refused_change(db):
    """The launch wizard asks POST /instances/check for every flavor a viewer looks at: a dry run, refused with 403
    but not audited (the create's refusal is: tests/compute/test_launch_check.py)."""
    from apps.compute.models import Flavor

    org = make_org("acme")
    project = make_project(org, "web")
    flavor = Flavor.objects.create(name="c2", vcpus=2, memory_mib=4096, disk_gib=20)
    viewer = make_user("viewer@acme.test")
    member(viewer, org, OrgRole.VIEWER)
    client = client_for(token_for(viewer, organization=org))
    body = {"project": str(project.pk), "flavor": str(flavor.pk), "name": "", "ssh_keys": [], "user_data": "",
            "sla_tier": "", "queue": False}
    r = client.post("/api/v1/instances/check/", body, format="json")
    assert r.status_code == 403, r.content
    assert not AuditEvent.objects.filter(action=REFUSED).exists()

