"""Who changes a tenant's quota: the provider's operators (a quota commits the fleet's capacity), and for a
project's limit also the organization's owners and admins; billing admins and support read quotas. Each quota says
what the caller may do with it (`allowed_actions`), so the admin portal offers Change only where the server would
let it; a refused change writes nothing but its audit record."""
import pytest

from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole, Quota
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db


def _staff(role):
    return client_for(token_for(make_user(f"{role}@provider.test", staff_role=role), staff=True))


@pytest.fixture
def quotas(db):
    org = make_org("acme")
    project = make_project(org, "web")
    org_quota = Quota.objects.get(organization=org, project=None, resource="gpus")   # the plan's default
    org_quota.limit = 8
    org_quota.save()
    project_quota = Quota.objects.create(organization=org, project=project, resource="vcpus", limit=64)
    return org, org_quota, project_quota


@pytest.mark.parametrize("role", [StaffRole.BILLING_ADMIN, StaffRole.SUPPORT])
def test_billing_admins_and_support_read_quotas_but_cannot_change_them(quotas, role):
    _org, org_quota, project_quota = quotas
    client = _staff(role)
    listed = client.get("/api/v1/quotas/", {"organization": str(org_quota.organization_id)}).json()["results"]
    assert listed and {tuple(q["allowed_actions"]) for q in listed} == {()}
    for quota in (org_quota, project_quota):
        r = client.patch(f"/api/v1/quotas/{quota.pk}/", {"limit": 999}, format="json")
        assert (r.status_code, r.json()["code"]) == (403, "permission_denied"), r.content
    assert Quota.objects.get(pk=org_quota.pk).limit == 8 and Quota.objects.get(pk=project_quota.pk).limit == 64
    r = client.post("/api/v1/quotas/", {"organization": str(org_quota.organization_id), "resource": "vcpus",
                                        "limit": 10}, format="json")
    assert r.status_code == 403 and not Quota.objects.filter(project=None, resource="vcpus", limit=10).exists()


def test_an_operator_changes_quotas_and_is_told_so(quotas):
    _org, org_quota, _project_quota = quotas
    ops = _staff(StaffRole.OPERATOR)
    body = ops.get(f"/api/v1/quotas/{org_quota.pk}/").json()
    assert body["allowed_actions"] == ["update", "delete"]
    r = ops.patch(f"/api/v1/quotas/{org_quota.pk}/", {"limit": 16}, format="json")
    assert r.status_code == 200 and r.json()["limit"] == 16


def test_a_non_integer_limit_is_refused_on_the_field(quotas):
    _org, org_quota, _ = quotas
    r = _staff(StaffRole.OPERATOR).patch(f"/api/v1/quotas/{org_quota.pk}/", {"limit": "1.5"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["limit"], r.content
    assert Quota.objects.get(pk=org_quota.pk).limit == 8


def test_an_organization_admin_changes_only_its_projects_limits(quotas):
    org, org_quota, project_quota = quotas
    admin = make_user("admin@acme.test")
    member(admin, org, OrgRole.ADMIN)
    client = client_for(token_for(admin, organization=org))
    listed = {(q["scope"], q["resource"]): q["allowed_actions"] for q in client.get("/api/v1/quotas/").json()["results"]}
    assert listed[("project", "vcpus")] == ["update", "delete"] and listed[("organization", "gpus")] == []
    assert client.patch(f"/api/v1/quotas/{project_quota.pk}/", {"limit": 32}, format="json").status_code == 200
    assert client.patch(f"/api/v1/quotas/{org_quota.pk}/", {"limit": 32}, format="json").status_code == 403
