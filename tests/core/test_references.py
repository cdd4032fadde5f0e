"""References to other objects answer one way (ADR 0010): another tenant's id, a random id and a malformed id are
all 400 `validation_error` "Not found." naming the member or parameter; unknown query parameters are 400 naming
them. The full walk over every endpoint is tests/authz/test_references.py; these pin the cases that used to differ.
"""
import uuid

import pytest

from apps.compute.models import Flavor, Image, Instance
from apps.networking import services as net
from apps.networking.models import Port
from tests.networking.helpers import Tenant, operator_client, vpc_with_subnet

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenants():
    return Tenant("alpha"), Tenant("beta")


def _not_found(response, member: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "validation_error"
    assert body["errors"] == {member: ["Not found."]}


def test_a_list_filter_answers_another_tenants_id_as_a_random_one(tenants):
    a, b = tenants
    theirs = a.client.get("/api/v1/instances/", {"project": str(b.project.pk)})   # was 200 [] (an oracle)
    missing = a.client.get("/api/v1/instances/", {"project": str(uuid.uuid4())})  # was 400
    _not_found(theirs, "project")
    _not_found(missing, "project")
    assert a.client.get("/api/v1/instances/", {"project": str(a.project.pk)}).status_code == 200


def _flavor_and_image() -> tuple[Flavor, Image]:
    return (Flavor.objects.create(name="c1", vcpus=1, memory_mib=1024),
            Image.objects.create(name="u", os="ubuntu", source_url="https://images.test/u.qcow2",
                                 checksum="sha256:" + "a" * 64))


def test_a_body_reference_to_another_tenants_subnet_is_the_400_networking_gives(tenants):
    a, b = tenants
    _vpc_b, subnet_b = vpc_with_subnet(b)
    flavor, image = _flavor_and_image()
    body = {"project": str(a.project.pk), "name": "vm", "flavor": str(flavor.pk), "image": str(image.pk)}
    r = a.client.post("/api/v1/instances/", {**body, "subnet_id": str(subnet_b.pk)}, format="json")  # was 404
    _not_found(r, "subnet_id")
    r = a.client.post("/api/v1/instances/", {**body, "subnet_id": str(uuid.uuid4())}, format="json")
    _not_found(r, "subnet_id")
    r = a.client.post("/api/v1/instances/", {**body, "project": str(b.project.pk)}, format="json")  # was 404
    _not_found(r, "project")
    assert not Instance.objects.exists()


def test_a_flavor_for_an_unknown_organization_is_refused_not_dropped():
    _user, staff = operator_client()
    r = staff.post("/api/v1/flavors/", {"name": "private", "vcpus": 1, "memory_mib": 1024,
                                        "visibility": "organization", "organizations": [str(uuid.uuid4())]},
                   format="json")  # was 201 with no organization
    _not_found(r, "organizations")
    assert not Flavor.objects.filter(name="private").exists()


def test_a_webhook_for_another_organization_is_the_same_400(tenants):
    a, b = tenants
    from apps.tenancy.models import OrgRole
    from tests.tenancy.helpers import client_for, make_user, member, token_for

    owner = make_user("owner@alpha.test")
    member(owner, a.org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=a.org))
    for org in (str(b.org.pk), str(uuid.uuid4()), "not-an-id"):
        r = client.post("/api/v1/webhooks/", {"organization": org, "url": "https://hooks.test/x"}, format="json")
        _not_found(r, "organization")  # another organization was a 404


def test_unknown_query_parameters_are_refused_by_name(tenants):
    a, _b = tenants
    r = a.client.get("/api/v1/projects/", {"name": "ML"})  # listed every project
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error"
    assert r.json()["errors"] == {"name": ["Unknown parameter."]}
    r = a.client.get("/api/v1/projects/", {"slug": "x", "colour": "red", "size": "1"})
    assert sorted(r.json()["errors"]) == ["colour", "size"]
    assert a.client.get("/api/v1/projects/", {"page_size": "1", "organization": str(a.org.pk)}).status_code == 200
    assert a.client.get(f"/api/v1/projects/{a.project.pk}/", {"bogus": "1"}).status_code == 400


def test_the_ports_instance_filter_filters(tenants):
    a, b = tenants
    _vpc, subnet = vpc_with_subnet(a)
    flavor, image = _flavor_and_image()
    vm = Instance.objects.create(project=a.project, name="vm", flavor=flavor, image=image)
    bound, other = net.port_create(actor=None, subnet=subnet), net.port_create(actor=None, subnet=subnet)
    Port.objects.filter(pk=bound.pk).update(instance_id=vm.pk)
    r = a.client.get("/api/v1/ports/", {"instance": str(vm.pk)})  # was ignored: both ports
    assert r.status_code == 200, r.content
    assert [p["id"] for p in r.json()["results"]] == [str(bound.pk)]
    assert str(other.pk) not in r.content.decode()
    _not_found(b.client.get("/api/v1/ports/", {"instance": str(vm.pk)}), "instance")
    _not_found(b.client.get("/api/v1/ports/", {"instance": str(uuid.uuid4())}), "instance")
