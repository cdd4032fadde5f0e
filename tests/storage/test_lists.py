"""Storage lists: paginated, filtered, and read in a number of queries that does not grow with the page."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.storage.models import Snapshot, Volume, VolumeAttachment

from .conftest import instance

pytestmark = pytest.mark.django_db


def _volumes(w, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        vol = Volume.objects.create(project=w.project_a, name=f"v{i}", size_gib=10, volume_type=w.ssd, status="in-use")
        VolumeAttachment.objects.create(volume=vol, instance=instance(w.project_a, f"vm{i}"), device="vdb",
                                        status="attached")
        Snapshot.objects.create(project=w.project_a, volume=vol, name=f"s{i}", size_gib=10, status="available")


def _queries(client, path: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as ctx:
        resp = client.get(path)
    assert resp.status_code == 200
    return len(ctx.captured_queries), len(resp.json()["results"])


@pytest.mark.parametrize("path", ["/api/v1/volumes/", "/api/v1/snapshots/", "/api/v1/volume-types/"])
def test_list_queries_do_not_grow_with_the_page(world, path):
    _volumes(world, 2)
    _queries(world.client_a, path)  # the first request also records the token's use
    few, n_few = _queries(world.client_a, path)
    _volumes(world, 6, start=2)
    many, n_many = _queries(world.client_a, path)
    assert few == many, (few, many)
    assert (n_few, n_many) == ((2, 8) if "types" not in path else (2, 2))


def test_filters_and_pages(world):
    _volumes(world, 3)
    Volume.objects.filter(name="v0").update(status="available")
    assert [v["name"] for v in world.client_a.get("/api/v1/volumes/?status=available").json()["results"]] == ["v0"]
    v1 = Volume.objects.get(name="v1")
    att = VolumeAttachment.objects.get(volume=v1)
    assert [v["name"] for v in world.client_a.get(f"/api/v1/volumes/?instance={att.instance_id}").json()[
        "results"]] == ["v1"]
    assert [s["name"] for s in world.client_a.get(f"/api/v1/snapshots/?volume={v1.pk}").json()["results"]] == ["s1"]
    page = world.client_a.get("/api/v1/volumes/?page_size=2").json()
    assert (len(page["results"]), page["next"] is not None) == (2, True)
    bad = world.client_a.get("/api/v1/volumes/?status=melting")
    assert (bad.status_code, set(bad.json()["errors"])) == (400, {"status"})
    theirs = world.client_a.get(f"/api/v1/volumes/?instance={world.instance_b.pk}")
    assert (theirs.status_code, theirs.json()["errors"]) == (400, {"instance": ["Not found."]})
