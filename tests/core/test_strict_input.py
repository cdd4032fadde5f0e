"""Request bodies are strict: a member the endpoint does not define is a 400 naming it, and nothing is written."""
import pytest

from apps.networking.models import Vpc
from tests.tenancy.helpers import make_project, org_owner_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant():
    org, _owner, client = org_owner_client()
    return make_project(org, "train"), client


def test_a_misspelt_field_is_a_400_naming_it_and_nothing_is_created(tenant):
    project, client = tenant
    resp = client.post("/api/v1/vpcs", {"project": str(project.id), "name": "net", "cidr": "10.10.0.0/16",
                                        "descripton": "typo"}, format="json")  # valid but for the typo
    assert resp.status_code == 400, resp.content
    assert resp["Content-Type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == "validation_error" and body["errors"] == {"descripton": ["Unknown field."]}
    assert "descripton" in body["detail"]
    assert not Vpc.objects.exists()


def test_several_unknown_fields_are_all_named(tenant):
    project, client = tenant
    body = client.post("/api/v1/vpcs", {"project": str(project.id), "name": "net", "cidr": "10.10.0.0/16",
                                        "b": 1, "a": 2}, format="json").json()
    assert sorted(body["errors"]) == ["a", "b"] and "a, b" in body["detail"]


def test_the_same_body_without_the_unknown_field_is_accepted(tenant):
    project, client = tenant
    resp = client.post("/api/v1/vpcs", {"project": str(project.id), "name": "net", "cidr": "10.10.0.0/16"},
                       format="json")
    assert resp.status_code in (201, 202), resp.content
    assert Vpc.objects.filter(name="net").count() == 1


def test_direct_validation_sites_are_strict_too(tenant):
    _project, client = tenant
    resp = client.post("/api/v1/tokens", {"name": "ci", "scope": "read", "scpoe": "write"}, format="json")
    assert resp.status_code == 400 and resp.json()["errors"] == {"scpoe": ["Unknown field."]}
