"""A token bound to one project creates in that project without naming it (apps.core.references.VisibleField).

A fresh user's walkthrough: `POST /api/v1/ssh-keys/` without `project` with a project-bound token answered 400
"project: This field is required." although the token can reach no other project. Every create whose body takes a
required `project` now defaults it to the token's project; a session, an organization token and a staff token still
must send it, and a sent project resolves as before (another one is `Not found.`).
"""
import pytest

from apps.compute.models import SshKey
from apps.networking.models import Vpc
from tests.compute.conftest import ED25519
from tests.tenancy.helpers import client_for, make_project, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def bound(world):
    return client_for(token_for(world.member_a, project=world.project_a))


def test_a_project_bound_token_s_ssh_key_goes_to_its_project(world, bound):
    r = bound.post("/api/v1/ssh-keys/", {"name": "laptop", "public_key": ED25519}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["project"] == str(world.project_a.pk)
    assert SshKey.objects.get(name="laptop").project_id == world.project_a.pk


def test_a_project_bound_token_s_vpc_goes_to_its_project(world, bound):
    """The same default for every create with a required project (networking here), not one endpoint's."""
    r = bound.post("/api/v1/vpcs", {"name": "net", "cidr": "10.20.0.0/16"}, format="json")
    assert r.status_code in (201, 202), r.content
    assert Vpc.objects.get(name="net").project_id == world.project_a.pk


def test_an_organization_token_must_still_name_the_project(world):
    r = world.client_a.post("/api/v1/ssh-keys/", {"name": "laptop", "public_key": ED25519}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"project": ["This field is required."]}
    assert not SshKey.objects.exists()


def test_a_project_bound_token_naming_another_project_is_not_found(world, bound):
    other = make_project(world.org_a, "other")
    r = bound.post("/api/v1/ssh-keys/", {"project": str(other.pk), "name": "laptop", "public_key": ED25519},
                   format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"project": ["Not found."]}
    assert not SshKey.objects.exists()
