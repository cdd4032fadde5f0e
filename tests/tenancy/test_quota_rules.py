"""Quota limits that could never mean anything are refused: a qualifier naming no catalog entry
(`gpus:NOPE-GPU`), and a project limit above its organization's (ADR 0103)."""
import pytest

from apps.tenancy.models import Quota

from .helpers import client_for, make_project, make_user, org_owner_client, token_for


@pytest.fixture
def acme(db):
    return org_owner_client()


@pytest.fixture
def staff_client(db):
    return client_for(token_for(make_user("ops@provider.test", staff_role="operator"), staff=True))


@pytest.mark.parametrize("resource", ["gpus:NOPE-GPU", "mig_slices:9g.99gb", "vgpus:NOPE-8Q"])
def test_unknown_qualifier_is_400_unknown_resource(acme, staff_client, resource):
    org, _owner, client = acme
    web = make_project(org, "web")
    before = Quota.objects.count()
    r = staff_client.post("/api/v1/quotas/", {"organization": str(org.pk), "resource": resource, "limit": 4})
    assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (400, "unknown_resource", ["resource"])
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk), "resource": resource,
                                        "limit": 1})
    assert (r.status_code, r.json()["code"]) == (400, "unknown_resource")
    assert Quota.objects.count() == before


def test_catalog_qualifiers_are_accepted(staff_client, acme):
    org, _owner, _client = acme
    for resource in ("gpus:H100-SXM5-80GB", "mig_slices:3g.40gb"):
        r = staff_client.post("/api/v1/quotas/", {"organization": str(org.pk), "resource": resource, "limit": 4})
        assert r.status_code == 201, r.content


def test_project_limit_above_the_organization_is_400(acme):
    org, _owner, client = acme
    web = make_project(org, "web")
    org_gpus = Quota.objects.get(organization=org, project=None, resource="gpus").limit
    before = Quota.objects.count()
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk), "resource": "gpus",
                                        "limit": org_gpus + 1})
    assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (400, "quota_above_organization",
                                                                          ["limit"])
    # a qualified project limit is bounded by the organization's total too
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk),
                                        "resource": "gpus:H100-SXM5-80GB", "limit": org_gpus + 1})
    assert (r.status_code, r.json()["code"]) == (400, "quota_above_organization")
    assert Quota.objects.count() == before
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk), "resource": "gpus",
                                        "limit": org_gpus})
    assert r.status_code == 201, r.content
    r = client.patch(f"/api/v1/quotas/{r.json()['id']}/", {"limit": org_gpus + 5})
    assert (r.status_code, r.json()["code"]) == (400, "quota_above_organization")
    assert Quota.objects.get(project=web, resource="gpus").limit == org_gpus
