"""What the storage API refuses, and that a refusal writes nothing: quotas (422), wrong states and conflicts (409),
bad input (400), another tenant's objects (404 in the path, "Not found." in the body, as an id that does not
exist)."""
from __future__ import annotations

import uuid

import pytest

from apps.compute.models import Instance
from apps.operations.models import Operation
from apps.storage.models import Snapshot, Volume, VolumeAttachment
from apps.storage.services.attachments import volume_attach
from apps.tenancy.models import Quota

from .conftest import instance, volume_body

pytestmark = pytest.mark.django_db


def _volume(w, status="available", name="data", size_gib=10, project=None) -> Volume:
    return Volume.objects.create(project=project or w.project_a, name=name, size_gib=size_gib, volume_type=w.ssd,
                                 status=status)


def _nothing_written(before: tuple) -> None:
    assert (Volume.objects.count(), Snapshot.objects.count(), VolumeAttachment.objects.count(),
            Operation.objects.count()) == before


def _counts() -> tuple:
    return (Volume.objects.count(), Snapshot.objects.count(), VolumeAttachment.objects.count(),
            Operation.objects.count())


def test_quota_on_gib_per_type_refuses_and_writes_nothing(world):
    Quota.objects.create(organization=world.org_a, project=world.project_a, resource="volume_gib:ssd", limit=50)
    ok = world.client_a.post("/api/v1/volumes/", volume_body(world, "one", 40), format="json")
    assert ok.status_code == 202, ok.content
    before = _counts()
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "two", 11), format="json")
    assert resp.status_code == 422
    body = resp.json()
    assert (body["code"], body["resource"], body["limit"], body["usage"], body["requested"], body["scope"]) == (
        "quota_exceeded", "volume_gib:ssd", 50, 40, 11, "project")
    _nothing_written(before)
    assert world.client_a.post("/api/v1/volumes/", volume_body(world, "two", 10), format="json").status_code == 202


def test_quota_on_volume_count_and_on_extend(world):
    Quota.objects.create(organization=world.org_a, project=None, resource="volumes", limit=1)
    Quota.objects.create(organization=world.org_a, project=None, resource="volume_gib", limit=30)
    vol = _volume(world, size_gib=20)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "two", 1), format="json")
    assert (resp.status_code, resp.json()["resource"], resp.json()["scope"]) == (422, "volumes", "organization")
    before = _counts()
    ext = world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": 31}, format="json")
    assert (ext.status_code, ext.json()["resource"], ext.json()["requested"]) == (422, "volume_gib", 11)
    _nothing_written(before)
    vol.refresh_from_db()
    assert (vol.size_gib, vol.status) == (20, "available")


def test_extend_refuses_shrinking_and_the_same_size(world):
    vol = _volume(world, size_gib=20)
    for size in (10, 20):
        resp = world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": size}, format="json")
        assert (resp.status_code, resp.json()["code"], resp.json()["errors"]) == (
            400, "size_must_grow", {"size_gib": ["Must be larger than 20 GiB: volumes never shrink."]})
    over = world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": 1001}, format="json")
    assert (over.status_code, over.json()["errors"]) == (400, {"size_gib": ["1..1000"]})
    vol.refresh_from_db()
    assert (vol.size_gib, vol.status, Operation.objects.count()) == (20, "available", 0)


def test_delete_of_an_attached_volume_is_409_with_the_allowed_states(world):
    vol = _volume(world, status="in-use")
    VolumeAttachment.objects.create(volume=vol, instance=world.instance_a, device="vdb", status="attached")
    resp = world.client_a.delete(f"/api/v1/volumes/{vol.pk}/")
    body = resp.json()
    assert (resp.status_code, body["code"], body["current_state"], body["allowed_states"]) == (
        409, "invalid_state", "in-use", ["available", "error"])
    vol.refresh_from_db()
    assert (vol.status, Operation.objects.count()) == ("in-use", 0)


def test_another_tenants_volume_answers_like_a_missing_one(world):
    theirs = _volume(world, project=world.project_b, name="theirs")
    for path in (f"/api/v1/volumes/{theirs.pk}/", f"/api/v1/volumes/{uuid.uuid4()}/"):
        assert world.client_a.get(path).status_code == 404
        for act, body in (("extend", {"size_gib": 50}), ("attach", {"instance": str(world.instance_a.pk)})):
            resp = world.client_a.post(f"{path}{act}/", body, format="json")
            assert (resp.status_code, resp.json()["code"]) == (404, "not_found")
        assert world.client_a.delete(path).status_code == 404
    assert world.client_a.get("/api/v1/volumes/").json()["results"] == []
    theirs.refresh_from_db()
    assert (theirs.size_gib, theirs.status, Operation.objects.count()) == (10, "available", 0)


def test_attach_to_another_tenants_instance_answers_like_a_missing_one(world):
    vol = _volume(world)
    answers = []
    for target in (world.instance_b.pk, uuid.uuid4()):
        resp = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(target)}, format="json")
        answers.append((resp.status_code, resp.json()["code"], resp.json()["errors"]))
    assert answers == [(400, "validation_error", {"instance": ["Not found."]})] * 2
    vol.refresh_from_db()
    assert (vol.status, VolumeAttachment.objects.count(), Operation.objects.count()) == ("available", 0, 0)


def test_attach_to_an_instance_of_another_project_of_the_tenant_is_not_found(world):
    from tests.tenancy.helpers import make_project

    other = instance(make_project(world.org_a, "second"), "vm-2")
    vol = _volume(world)
    with pytest.raises(Exception) as exc:
        volume_attach(actor=None, volume=vol, instance=other)
    assert (exc.value.status, exc.value.errors) == (400, {"instance": ["Not found."]})
    assert VolumeAttachment.objects.count() == 0


def test_attach_refusals(world):
    vol = _volume(world)
    stopped_elsewhere = instance(world.project_a, "vm-pending", status="pending")
    resp = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(stopped_elsewhere.pk)},
                               format="json")
    body = resp.json()
    assert (resp.status_code, body["code"], body["instance_status"], body["allowed_states"]) == (
        409, "invalid_state", "pending", ["active", "stopped"])
    ok = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(world.instance_a.pk)},
                             format="json")
    assert (ok.status_code, ok.json()["volume"]["status"]) == (202, "attaching")
    assert ok.json()["volume"]["attachments"][0]["device"] == "vdb"
    again = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(world.instance_a.pk)},
                                format="json")
    assert (again.status_code, again.json()["code"]) == (409, "already_attached")
    other = _volume(world, name="second", status="in-use")
    busy = world.client_a.post(f"/api/v1/volumes/{other.pk}/attach/", {"instance": str(world.instance_a.pk)},
                               format="json")
    assert (busy.status_code, busy.json()["code"], busy.json()["allowed_states"]) == (409, "invalid_state",
                                                                                      ["available"])


def test_an_instance_takes_at_most_16_volumes(world):
    for i in range(16):
        volume_attach(actor=None, volume=_volume(world, name=f"v{i}"), instance=world.instance_a)
    devices = sorted(VolumeAttachment.objects.values_list("device", flat=True))
    assert devices == [f"vd{c}" for c in "bcdefghijklmnopq"]
    extra = _volume(world, name="v16")
    before = _counts()
    resp = world.client_a.post(f"/api/v1/volumes/{extra.pk}/attach/", {"instance": str(world.instance_a.pk)},
                               format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["limit"]) == (409, "attachment_limit_reached", 16)
    _nothing_written(before)
    extra.refresh_from_db()
    assert extra.status == "available"


def test_a_boot_volume_does_not_detach_even_from_a_stopped_instance(world):
    vol = _volume(world, status="in-use")
    VolumeAttachment.objects.create(volume=vol, instance=world.instance_a, device="vdb", boot=True,
                                    status="attached")
    for status in ("active", "stopped"):
        Instance.objects.filter(pk=world.instance_a.pk).update(status=status)
        resp = world.client_a.post(f"/api/v1/volumes/{vol.pk}/detach/", {"instance": str(world.instance_a.pk)},
                                   format="json")
        body = resp.json()
        assert (resp.status_code, body["code"], body["instances"], body["instance_status"]) == (
            409, "boot_volume_detach_not_allowed", [str(world.instance_a.pk)], status)
    Instance.objects.filter(pk=world.instance_a.pk).update(status="active")
    vol.refresh_from_db()
    assert (vol.status, VolumeAttachment.objects.get().status, Operation.objects.count()) == ("in-use", "attached", 0)
    not_attached = world.client_a.post(f"/api/v1/volumes/{_volume(world, name='x').pk}/detach/",
                                       {"instance": str(world.instance_a.pk)}, format="json")
    assert (not_attached.status_code, not_attached.json()["code"]) == (409, "not_attached")


def test_host_local_volumes_need_an_instance_and_stay_on_its_host(world):
    body = {**volume_body(world, "scratch"), "volume_type": str(world.local.pk)}
    resp = world.client_a.post("/api/v1/volumes/", body, format="json")
    assert (resp.status_code, resp.json()["code"]) == (400, "host_local_needs_instance")
    made = world.client_a.post("/api/v1/volumes/", {**body, "instance": str(world.instance_a.pk)}, format="json")
    assert made.status_code == 202, made.content
    vol = Volume.objects.get(pk=made.json()["volume"]["id"])
    assert vol.host_id == world.instance_a.host_id
    Volume.objects.filter(pk=vol.pk).update(status="available")
    elsewhere = instance(world.project_a, "vm-elsewhere")
    resp = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(elsewhere.pk)}, format="json")
    assert (resp.status_code, resp.json()["code"]) == (409, "host_mismatch")


def test_bad_input_is_400_naming_the_member(world):
    cases = [
        (volume_body(world, "Bad Name"), {"name"}),
        (volume_body(world, size_gib=0), {"size_gib"}),
        (volume_body(world, size_gib=1001), {"size_gib"}),
        ({**volume_body(world), "volume_type": None}, {"volume_type"}),
        ({**volume_body(world), "colour": "blue"}, {"colour"}),
        ({**volume_body(world), "volume_type": str(uuid.uuid4())}, {"volume_type"}),
    ]
    for body, members in cases:
        resp = world.client_a.post("/api/v1/volumes/", body, format="json")
        assert (resp.status_code, resp["Content-Type"], set(resp.json()["errors"])) == (
            400, "application/problem+json", members), (body, resp.content)
    assert _counts() == (0, 0, 0, 0)


def test_names_are_unique_among_live_volumes_of_a_project(world):
    _volume(world, name="data")
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "data"), format="json")
    assert (resp.status_code, resp.json()["code"]) == (409, "name_taken")
    Volume.objects.filter(name="data").update(status="deleted")
    assert world.client_a.post("/api/v1/volumes/", volume_body(world, "data"), format="json").status_code == 202


def test_viewers_read_but_do_not_write(world):
    vol = _volume(world)
    assert world.viewer_a.get(f"/api/v1/volumes/{vol.pk}/").status_code == 200
    resp = world.viewer_a.post("/api/v1/volumes/", volume_body(world, "v"), format="json")
    assert (resp.status_code, resp.json()["code"]) == (403, "permission_denied")
    assert _counts() == (1, 0, 0, 0)


def test_volume_types_hide_their_pool_from_tenants(world):
    tenant = world.client_a.get(f"/api/v1/volume-types/{world.ssd.pk}/").json()
    staff = world.staff_client.get(f"/api/v1/volume-types/{world.ssd.pk}/").json()
    assert (tenant["pool"], tenant["pool_target_path"]) == ("", "")
    assert (staff["pool"], staff["pool_target_path"]) == ("ssd", "/srv/ssd")
    resp = world.client_a.post("/api/v1/volume-types/", {"name": "x", "pool": "x"}, format="json")
    assert resp.status_code == 403


def test_quota_on_snapshot_count_refuses_and_writes_nothing(world):
    Quota.objects.create(organization=world.org_a, project=world.project_a, resource="snapshots", limit=1)
    vol = _volume(world)
    ok = world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "s1"}, format="json")
    assert ok.status_code == 202, ok.content
    before = _counts()
    resp = world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "s2"}, format="json")
    body = resp.json()
    assert (resp.status_code, body["code"], body["resource"], body["limit"], body["usage"], body["scope"]) == (
        422, "quota_exceeded", "snapshots", 1, 1, "project")
    _nothing_written(before)
    Snapshot.objects.filter(name="s1").update(status="deleted")  # a deleted snapshot no longer counts
    assert world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "s2"},
                               format="json").status_code == 202


def test_a_deleted_volume_is_not_changed(world):
    vol = _volume(world, name="gone", status="deleted")
    resp = world.client_a.patch(f"/api/v1/volumes/{vol.pk}/", {"description": "rewritten"}, format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["current_state"]) == (409, "invalid_state", "deleted")
    vol.refresh_from_db()
    assert vol.description == ""
