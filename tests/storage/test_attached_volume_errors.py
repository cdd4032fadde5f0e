"""An attached volume whose operation failed: it stays detachable, it is never deleted while attached, and an
instance's delete releases it (through the API and the real step runner, on the in-memory storage fake)."""
from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.storage.models import Volume, VolumeAttachment
from apps.storage.services.reconcile import attachments_reconcile

from .conftest import SHARED_URI, boot, drive, volume_body

pytestmark = pytest.mark.django_db


def _done(resp, status="succeeded"):
    assert resp.status_code == 202, resp.content
    op = drive(resp.json()["operation"]["id"])
    assert op.status == status, (op.error_code, op.error_detail)
    return op


def _attached(world, storage_driver, *, running=False, **extra) -> Volume:
    boot(world.instance_a, running=running)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "data", 10, **extra), format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(world.instance_a.pk)},
                              format="json"))
    return Volume.objects.get(pk=vol_id)


def test_a_failed_extend_of_an_attached_volume_stays_in_use_and_detachable(world, storage_driver):
    vol = _attached(world, storage_driver)
    storage_driver._hosts[SHARED_URI].pools.pop("ssd")  # the stopped guest's volume grows on its pool: gone
    op = _done(world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": 60}, format="json"),
               status="failed")
    got = world.client_a.get(f"/api/v1/volumes/{vol.pk}/").json()
    assert (op.error_code, got["status"], got["error_code"], [a["status"] for a in got["attachments"]]) == (
        "pool_not_found", "in-use", "pool_not_found", ["attached"])
    assert got["size_gib"] == 10  # the size it has, not the one asked for
    refused = world.client_a.delete(f"/api/v1/volumes/{vol.pk}/")
    assert (refused.status_code, refused.json()["code"], refused.json()["instances"]) == (
        409, "invalid_state", [str(world.instance_a.pk)])
    _done(world.client_a.post(f"/api/v1/volumes/{vol.pk}/detach/", {"instance": str(world.instance_a.pk)},
                              format="json"))
    assert (Volume.objects.get(pk=vol.pk).status, VolumeAttachment.objects.count()) == ("available", 0)


def test_an_attached_error_volume_is_not_deleted_but_detaches(world, storage_driver):
    vol = _attached(world, storage_driver)
    Volume.objects.filter(pk=vol.pk).update(status="error")  # as an older release's failed extend left it
    refused = world.client_a.delete(f"/api/v1/volumes/{vol.pk}/")
    assert (refused.status_code, refused.json()["code"], refused.json()["current_state"],
            refused.json()["instances"]) == (409, "invalid_state", "error", [str(world.instance_a.pk)])
    assert Volume.objects.get(pk=vol.pk).status == "error"
    _done(world.client_a.post(f"/api/v1/volumes/{vol.pk}/detach/", {"instance": str(world.instance_a.pk)},
                              format="json"))
    assert (Volume.objects.get(pk=vol.pk).status, VolumeAttachment.objects.count()) == ("available", 0)
    assert world.client_a.delete(f"/api/v1/volumes/{vol.pk}/").status_code == 202


def test_an_instance_delete_releases_an_attached_error_volume(world, storage_driver):
    vol = _attached(world, storage_driver, delete_on_termination=True)
    Volume.objects.filter(pk=vol.pk).update(status="error")
    Instance.objects.filter(pk=world.instance_a.pk).update(status="deleted")
    assert len(attachments_reconcile().released) == 1
    assert (Volume.objects.get(pk=vol.pk).status, VolumeAttachment.objects.count()) == ("deleting", 0)


def test_a_failed_extend_keeps_the_old_size_and_frees_the_quota_it_asked_for(world, storage_driver):
    from apps.tenancy.quotas import usage_of

    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "loose", 10), format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    storage_driver._hosts[SHARED_URI].pools.pop("ssd")
    _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/extend/", {"size_gib": 60}, format="json"), status="failed")
    got = world.client_a.get(f"/api/v1/volumes/{vol_id}/").json()
    assert (got["status"], got["size_gib"], got["error_code"]) == ("available", 10, "pool_not_found")
    assert usage_of(organization=world.org_a, project=world.project_a, resource="volume_gib") == 10
