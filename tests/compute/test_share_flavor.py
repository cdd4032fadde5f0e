"""A fractional-GPU (`share`) flavor cannot back a VM (docs/compute.md, GPU forms): the instance create, the cluster
create and their launch checks answer 400 `share_not_supported_for_vm` naming `flavor` before quota and placement
(it used to reach the placement rule and come back as 409 `capacity_unavailable`), and nothing is written."""
from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.compute.models import Cluster, Flavor, Instance
from apps.operations.models import Operation
from apps.scheduling.models import Allocation

from .conftest import create_body, gpu_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def share(world) -> Flavor:
    gpu_host(gpus=2)
    return Flavor.objects.create(name="h100-half", vcpus=4, memory_mib=8192, gpu_form="share",
                                 gpu_model="H100-SXM5-80GB", share_milli=500)


@pytest.mark.parametrize("url, extra", [("/api/v1/instances/", {}), ("/api/v1/instances/check/", {}),
                                        ("/api/v1/clusters/", {"size": 2}), ("/api/v1/clusters/check/", {"size": 2}),
                                        ("/api/v1/instances/", {"queue": True})])
def test_share_flavor_is_refused_before_placement(world, share, url, extra, django_capture_on_commit_callbacks):
    audits = AuditEvent.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        resp = world.client_a.post(url, {**create_body(world, share), **extra}, format="json")
    assert (resp.status_code, resp["Content-Type"]) == (400, "application/problem+json"), resp.content
    body = resp.json()
    assert (body["code"], list(body["errors"])) == ("share_not_supported_for_vm", ["flavor"])
    assert (Instance.objects.count(), Cluster.objects.count(), Operation.objects.count(),
            Allocation.objects.count(), AuditEvent.objects.count() - audits, callbacks) == (0, 0, 0, 0, 0, [])
