"""Bad input to POST /instances is a 4xx problem+json with a stable code, and nothing is written, allocated
or scheduled ."""
from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.compute.drivers.base import USER_DATA_MAX_BYTES
from apps.compute.models import Instance, SshKey
from apps.operations.models import Operation
from apps.scheduling.models import Allocation

from .conftest import ED25519, create_body, gpu_host, new_uuid

pytestmark = pytest.mark.django_db


def _other_tenant_key(world) -> SshKey:
    return SshKey.objects.create(project=world.project_b, name="b", public_key=ED25519, fingerprint="SHA256:b")


# A reference the caller cannot see, or that does not exist, is one answer (ADR 0010): 400 "Not found." naming it.
NOT_FOUND = (400, "validation_error")
CASES = {
    "flavor not offered to the project": (lambda w: {"flavor": str(w.private_b.pk)}, *NOT_FOUND),
    "unknown flavor": (lambda w: {"flavor": new_uuid()}, *NOT_FOUND),
    "missing image": (lambda w: {"image": new_uuid()}, *NOT_FOUND),
    "another tenant's SSH key": (lambda w: {"ssh_keys": [str(_other_tenant_key(w).pk)]}, *NOT_FOUND),
    "over-long name": (lambda w: {"name": "a" * 64}, 400, "validation_error"),
    "name that is not a hostname": (lambda w: {"name": "Web_1"}, 400, "validation_error"),
    "user data over the limit": (lambda w: {"user_data": "#cloud-config\n" + "x" * USER_DATA_MAX_BYTES}, 400,
                                 "user_data_too_large"),
    "malformed flavor id": (lambda w: {"flavor": "not-a-uuid"}, 400, "validation_error"),
    "another tenant's project": (lambda w: {"project": str(w.project_b.pk)}, *NOT_FOUND),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_writes_nothing(world, case, django_capture_on_commit_callbacks):
    gpu_host(gpus=2)
    overrides, status, code = CASES[case]
    override = overrides(world)
    body = {**create_body(world, world.gpu1), **override}
    audits = AuditEvent.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        resp = world.client_a.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert (resp.status_code, resp.json()["code"]) == (status, code), resp.content
    assert resp["Content-Type"] == "application/problem+json"
    member = next(iter(override))
    if (status, code) == NOT_FOUND and member != "name":
        assert resp.json()["errors"] == {member: ["Not found."]}
    assert (Instance.objects.count(), Operation.objects.count(), Allocation.objects.count()) == (0, 0, 0)
    assert AuditEvent.objects.count() == audits
    assert callbacks == []


def test_quota_exceeded_is_422_with_nothing_written(world, django_capture_on_commit_callbacks):
    from apps.tenancy.models import Quota

    gpu_host(gpus=2)
    Quota.objects.create(organization=world.org_a, project=world.project_a, resource="gpus", limit=0)
    with django_capture_on_commit_callbacks() as callbacks:
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["resource"]) == (422, "quota_exceeded", "gpus")
    assert (Instance.objects.count(), callbacks) == (0, [])


def test_duplicate_live_name_is_409(world):
    gpu_host(gpus=2)
    assert world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json").status_code == 202
    again = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    assert (again.status_code, again.json()["code"]) == (409, "name_taken")


def test_other_tenant_gets_404_for_reads_and_actions(world):
    gpu_host(gpus=2)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    pk = resp.data["instance"]["id"]
    assert world.client_b.get(f"/api/v1/instances/{pk}/").status_code == 404
    assert world.client_b.post(f"/api/v1/instances/{pk}/stop/").status_code == 404
    assert world.client_b.delete(f"/api/v1/instances/{pk}/").status_code == 404
    assert world.client_b.get("/api/v1/instances/").json()["results"] == []
    assert Operation.objects.filter(kind="instance.delete").count() == 0


def test_another_tenants_gpu_instance_answers_every_action_like_a_missing_one(world):
    """Every action on another project's GPU instance (and its console log) is the 404 of an id that does not
    exist, body included, whatever the body asks, and changes nothing."""
    gpu_host(gpus=2)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    pk = resp.data["instance"]["id"]
    calls = [("post", "stop/", {"hard": True}), ("post", "start/", {}), ("post", "reboot/", {"hard": True}),
             ("post", "rebuild/", {"image": str(world.image.pk)}), ("post", "resize/", {"flavor": str(world.gpu1.pk)}),
             ("get", "console-log/", None), ("get", "", None), ("delete", "", None)]
    for method, tail, body in calls:
        ids = (pk, new_uuid())
        answers = [getattr(world.client_b, method)(f"/api/v1/instances/{i}/{tail}", body, format="json")
                   for i in ids]
        assert [a.status_code for a in answers] == [404, 404], (tail, answers[0].content)
        seen = [{k: str(v).replace(i, "ID") for k, v in a.json().items() if k != "request_id"}
                for a, i in zip(answers, ids, strict=True)]
        assert seen[0] == seen[1], tail
    assert Operation.objects.exclude(kind="instance.create").count() == 0


def test_every_exceeded_quota_is_named_at_once(world, django_capture_on_commit_callbacks):
    """A create past its GPU and its instance quota names both, so one raise of the limits (or one smaller
    request) is enough; the first one's `resource` ... stay as the console and the Terraform provider read them."""
    from apps.tenancy.models import Quota

    gpu_host(gpus=2)
    for resource in ("instances", "gpus:H100-SXM5-80GB"):
        Quota.objects.create(organization=world.org_a, project=world.project_a, resource=resource, limit=0)
    with django_capture_on_commit_callbacks() as callbacks:
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (resp.status_code, resp["Content-Type"]) == (422, "application/problem+json")
    body = resp.json()
    now_on = "0 in use at the busiest moment from now on (leases to come included)"   # ADR 0802
    assert body["detail"] == ("Quota exceeded: 0 instances allowed, 0 in use, 1 more requested (project pa); "
                              f"0 H100-SXM5-80GB GPUs allowed, {now_on}, 1 more requested (project pa).")
    assert {k: body[k] for k in ("code", "resource", "limit", "usage", "requested", "scope")} == {
        "code": "quota_exceeded", "resource": "instances", "limit": 0, "usage": 0, "requested": 1, "scope": "project"}
    assert body["exceeded"] == [
        {"resource": "instances", "scope": "project", "limit": 0, "usage": 0, "requested": 1,
         "message": "0 instances allowed, 0 in use, 1 more requested (project pa)"},
        {"resource": "gpus:H100-SXM5-80GB", "scope": "project", "limit": 0, "usage": 0, "requested": 1,
         "message": f"0 H100-SXM5-80GB GPUs allowed, {now_on}, 1 more requested (project pa)"}]
    assert (Instance.objects.count(), Allocation.objects.count(), callbacks) == (0, 0, [])
