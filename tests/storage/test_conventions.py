"""The API conventions on storage endpoints: Idempotency-Key on creates, ETag / If-Match on a volume, quota keys
checked against the volume types."""
from __future__ import annotations

import pytest

from apps.operations.models import Operation
from apps.storage.models import Volume

from .conftest import volume_body

pytestmark = pytest.mark.django_db


def test_a_retried_create_with_its_idempotency_key_creates_one_volume(world):
    headers = {"HTTP_IDEMPOTENCY_KEY": "vol-create-1"}
    first = world.client_a.post("/api/v1/volumes/", volume_body(world), format="json", **headers)
    again = world.client_a.post("/api/v1/volumes/", volume_body(world), format="json", **headers)
    assert (first.status_code, again.status_code, again["Idempotent-Replayed"]) == (202, 202, "true")
    assert again.json()["volume"]["id"] == first.json()["volume"]["id"]
    assert (Volume.objects.count(), Operation.objects.count()) == (1, 1)
    other = world.client_a.post("/api/v1/volumes/", volume_body(world, size_gib=11), format="json", **headers)
    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")


def test_volume_changes_honour_if_match(world):
    vol = Volume.objects.create(project=world.project_a, name="data", size_gib=10, volume_type=world.ssd,
                                status="available")
    got = world.client_a.get(f"/api/v1/volumes/{vol.pk}/")
    etag = got["ETag"]
    stale = world.client_a.patch(f"/api/v1/volumes/{vol.pk}/", {"name": "x"}, format="json", HTTP_IF_MATCH='"0"')
    assert (stale.status_code, stale.json()["code"]) == (412, "precondition_failed")
    ok = world.client_a.patch(f"/api/v1/volumes/{vol.pk}/", {"name": "renamed", "delete_on_termination": True},
                              format="json", HTTP_IF_MATCH=etag)
    assert (ok.status_code, ok.json()["name"], ok.json()["delete_on_termination"]) == (200, "renamed", True)
    assert ok["ETag"] != etag
    gone = world.client_a.delete(f"/api/v1/volumes/{vol.pk}/", HTTP_IF_MATCH=etag)
    assert gone.status_code == 412
    vol.refresh_from_db()
    assert (vol.name, vol.status) == ("renamed", "available")


def test_volume_gib_quota_names_a_volume_type(world):
    ok = world.staff_client.post("/api/v1/quotas/", {"organization": str(world.org_a.pk),
                                                     "resource": "volume_gib:ssd", "limit": 100}, format="json")
    assert ok.status_code == 201, ok.content
    bad = world.staff_client.post("/api/v1/quotas/", {"organization": str(world.org_a.pk),
                                                      "resource": "volume_gib:gold", "limit": 100}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, "unknown_resource")
    Volume.objects.create(project=world.project_a, name="d", size_gib=30, volume_type=world.ssd, status="available")
    listed = world.staff_client.get(f"/api/v1/quotas/?organization={world.org_a.pk}").json()["results"]
    (row,) = [q for q in listed if q["resource"] == "volume_gib:ssd"]
    assert (row["limit"], row["usage"]) == (100, 30)
