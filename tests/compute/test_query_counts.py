"""List endpoints run a bounded number of queries whatever the page holds."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.compute.models import Instance, SshKey

from .conftest import ED25519

pytestmark = pytest.mark.django_db


def _count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", ["/api/v1/instances/", "/api/v1/ssh-keys/", "/api/v1/flavors/", "/api/v1/images/",
                                 "/api/v1/clusters/"])
def test_list_query_count_does_not_grow(world, url):
    key = SshKey.objects.create(project=world.project_a, name="k0", public_key=ED25519, fingerprint="SHA256:0")
    Instance.objects.create(project=world.project_a, name="i0", flavor=world.cpu, image=world.image).ssh_keys.add(key)
    _count(world.client_a, url)  # warm-up: the first request of a token also records its use
    one = _count(world.client_a, url)
    for n in range(1, 6):
        k = SshKey.objects.create(project=world.project_a, name=f"k{n}", public_key=ED25519, fingerprint=f"SHA256:{n}")
        Instance.objects.create(project=world.project_a, name=f"i{n}", flavor=world.cpu, image=world.image
                                ).ssh_keys.add(k)
    assert _count(world.client_a, url) == one


def test_create_query_budget(world):
    from .conftest import create_body, gpu_host

    gpu_host(gpus=2)
    with CaptureQueriesContext(connection) as ctx:
        r = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json",
                                HTTP_IDEMPOTENCY_KEY="q")
    assert r.status_code == 202
    assert len(ctx.captured_queries) <= 60, "\n".join(q["sql"][:150] for q in ctx.captured_queries)


def test_launch_check_reads_the_quotas_once_per_key(world, django_assert_max_num_queries):
    """The wizard's "can it be placed" check of a GPU flavor (four quota keys: instances, vCPUs, memory, GPUs of
    the model and in all): the organization is locked and its plan and limits read once for all the keys, not
    once per key; each key's usage is still counted. (Locked and read per key, the same check ran 31 queries; now 22.)"""
    from .conftest import gpu_host

    gpu_host(gpus=2)
    body = {"project": str(world.project_a.pk), "flavor": str(world.gpu1.pk)}
    world.client_a.post("/api/v1/instances/check/", body, format="json")   # warm-up: the token's first use
    with django_assert_max_num_queries(24):
        r = world.client_a.post("/api/v1/instances/check/", body, format="json")
    assert r.status_code == 200 and r.json()["placeable"] is True, r.json()
    assert {line["resource"] for line in r.json()["quota"]} >= {"instances", "vcpus", "memory_mib"}
