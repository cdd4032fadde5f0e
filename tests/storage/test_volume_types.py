"""Volume types: staff define them (zones by name, the billing SKU shown); the pool of a type with volumes stays."""
from __future__ import annotations

import pytest

from apps.storage.models import Volume, VolumeType
from tests.scheduling import fleet

pytestmark = pytest.mark.django_db


def test_staff_define_a_type_served_in_named_zones(world):
    for name in ("eu-west-a", "eu-west-b"):
        fleet.zone(name)
    resp = world.staff_client.post("/api/v1/volume-types/", {
        "name": "fast", "pool": "fast", "pool_kind": "dir", "pool_target_path": "/srv/fast",
        "zones": ["eu-west-b", "eu-west-a"], "multi_attach": True, "iops_class": "high"}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert (body["zones"], body["sku"], body["multi_attach"], body["min_size_gib"]) == (
        ["eu-west-a", "eu-west-b"], "volume:type=fast", True, 1)
    unknown = world.staff_client.post("/api/v1/volume-types/", {"name": "x", "pool": "x", "zones": ["mars"]},
                                      format="json")
    assert (unknown.status_code, set(unknown.json()["errors"])) == (400, {"zones"})
    taken = world.staff_client.post("/api/v1/volume-types/", {"name": "fast", "pool": "y"}, format="json")
    assert (taken.status_code, taken.json()["code"]) == (409, "name_taken")

    # a volume in the default zone (the type's first by name); another zone must serve the type
    made = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "v",
                                                    "volume_type": body["id"], "size_gib": 1}, format="json")
    assert (made.status_code, made.json()["volume"]["zone"]) == (202, "eu-west-a")
    fleet.zone("us-east-a")
    elsewhere = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "w",
                                                         "volume_type": body["id"], "zone": "us-east-a"},
                                    format="json")
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (400, "zone_not_served")


def test_the_pool_of_a_type_with_volumes_cannot_change(world):
    Volume.objects.create(project=world.project_a, name="v", size_gib=1, volume_type=world.ssd, status="available")
    moved = world.staff_client.patch(f"/api/v1/volume-types/{world.ssd.pk}/", {"pool_target_path": "/new"},
                                     format="json")
    assert (moved.status_code, moved.json()["code"], moved.json()["fields"]) == (409, "conflict",
                                                                                 ["pool_target_path"])
    ok = world.staff_client.patch(f"/api/v1/volume-types/{world.ssd.pk}/", {"description": "replicated",
                                                                             "is_active": False}, format="json")
    assert (ok.status_code, ok.json()["description"], ok.json()["is_active"]) == (200, "replicated", False)
    assert VolumeType.objects.get(pk=world.ssd.pk).pool_target_path == "/srv/ssd"
    assert [t["name"] for t in world.client_a.get("/api/v1/volume-types/").json()["results"]] == ["nvme-local"]
    retired = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "w",
                                                       "volume_type": str(world.ssd.pk)}, format="json")
    assert (retired.status_code, retired.json()["errors"]) == (400, {"volume_type": ["Not found."]})
