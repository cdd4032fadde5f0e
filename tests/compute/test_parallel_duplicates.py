"""Identical creates sent at the same moment: exactly one is created and every other one gets the same 409 (and
code) a later duplicate gets, never a 500. Before, 8 parallel ``POST /ssh-keys/`` with one key gave 500s: both
passed the existence check, and the loser's unique violation escaped as an IntegrityError. Real threads, each
with its own PostgreSQL connection (`tests.parallel`)."""
import pytest

from apps.compute.models import Cluster, Instance, SshKey
from apps.networking.models import Vpc
from apps.tenancy.models import Project, Quota
from tests.parallel import outcome, post_parallel
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import ED25519, gpu_host
from .test_clusters import _cabled_hosts

pytestmark = pytest.mark.django_db(transaction=True)
N = 8


def _unlimited(org):
    Quota.objects.filter(organization=org).update(limit=10**9)


def test_parallel_identical_ssh_keys(world):
    body = {"project": str(world.project_a.pk), "name": "laptop", "public_key": ED25519}
    responses = post_parallel(world.client_a, "/api/v1/ssh-keys/", [body] * N)
    assert outcome(responses) == {(201, None): 1, (409, "ssh_key_exists"): N - 1}
    assert SshKey.objects.filter(project=world.project_a).count() == 1


def test_parallel_same_key_under_different_names(world):
    bodies = [{"project": str(world.project_a.pk), "name": f"k{i}", "public_key": ED25519} for i in range(N)]
    responses = post_parallel(world.client_a, "/api/v1/ssh-keys/", bodies)
    assert outcome(responses) == {(201, None): 1, (409, "ssh_key_exists"): N - 1}


def test_parallel_instances_with_one_name(world):
    _unlimited(world.org_a)
    gpu_host()
    body = {"project": str(world.project_a.pk), "name": "vm-1", "flavor": str(world.cpu.pk),
            "image": str(world.image.pk)}
    responses = post_parallel(world.client_a, "/api/v1/instances/", [body] * N)
    assert outcome(responses) == {(202, None): 1, (409, "name_taken"): N - 1}
    assert Instance.objects.filter(project=world.project_a, name="vm-1").count() == 1


def test_parallel_clusters_with_one_name(world):
    _unlimited(world.org_a)
    _cabled_hosts(2)
    body = {"project": str(world.project_a.pk), "name": "train", "flavor": str(world.cpu.pk),
            "image": str(world.image.pk), "size": 2}
    responses = post_parallel(world.client_a, "/api/v1/clusters/", [body] * N)
    assert outcome(responses) == {(201, None): 1, (409, "name_taken"): N - 1}
    assert Cluster.objects.filter(project=world.project_a).count() == 1
    assert Instance.objects.filter(project=world.project_a).count() == 2


def test_parallel_vpcs_with_one_name(world):
    _unlimited(world.org_a)
    body = {"project": str(world.project_a.pk), "name": "net", "cidr": "10.10.0.0/16"}
    responses = post_parallel(world.client_a, "/api/v1/vpcs", [body] * N)
    assert outcome(responses) == {(201, None): 1, (409, "name_taken"): N - 1}
    assert Vpc.objects.filter(project=world.project_a).count() == 1


def test_parallel_projects_with_one_slug(world):
    from apps.tenancy.models import OrgRole

    _unlimited(world.org_a)
    owner = make_user("owner@compute-a.test")
    member(owner, world.org_a, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=world.org_a))
    body = {"organization": str(world.org_a.pk), "slug": "ml", "name": "ML"}
    responses = post_parallel(client, "/api/v1/projects/", [body] * N)
    assert outcome(responses) == {(201, None): 1, (409, "slug_taken"): N - 1}
    assert Project.objects.filter(organization=world.org_a, slug="ml").count() == 1
