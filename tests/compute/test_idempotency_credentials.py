"""An `Idempotency-Key` belongs to the credential, and a replay is only answered to a caller who could make the
request: the key was scoped to the user and replayed before authorization, so a user's read-only token for
another project, sent with the key and body of that user's write token, got `201 Idempotent-Replayed: true` and
the id, prefix and project of a token it gets 404 on (and likewise for any create)."""
from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.identity.models import ApiToken, User
from tests.compute.conftest import gpu_host
from tests.tenancy.helpers import client_for, make_project, token_for

pytestmark = pytest.mark.django_db


def _two_tokens(w):
    """A write token of user a for project pa, and a read-only token of the same user for project web."""
    web = make_project(w.org_a, "web")
    return (client_for(token_for(w.member_a, project=w.project_a)),
            client_for(token_for(w.member_a, scope="read", project=web)))


def test_a_token_create_is_not_replayed_to_another_token_of_the_user(world):
    write, read_only = _two_tokens(world)
    body = {"name": "idem", "scope": "write", "project": str(world.project_a.pk)}
    first = write.post("/api/v1/tokens/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert first.status_code == 201, first.content
    tokens = ApiToken.objects.count()

    probe = read_only.post("/api/v1/tokens/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert probe.status_code in (400, 403, 404), probe.content
    assert "Idempotent-Replayed" not in probe.headers
    assert first.json()["id"] not in probe.content.decode() and first.json()["prefix"] not in probe.content.decode()
    assert read_only.get(f"/api/v1/tokens/{first.json()['id']}/").status_code == 404
    assert ApiToken.objects.count() == tokens

    retry = write.post("/api/v1/tokens/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert (retry.status_code, retry.headers.get("Idempotent-Replayed")) == (201, "true")
    assert retry.json()["id"] == first.json()["id"] and retry.json()["token"] is None
    assert ApiToken.objects.count() == tokens


def test_an_instance_create_is_not_replayed_to_another_token_of_the_user(world):
    gpu_host()
    write, read_only = _two_tokens(world)
    body = {"project": str(world.project_a.pk), "name": "vm-1", "flavor": str(world.cpu.pk),
            "image": str(world.image.pk)}
    first = write.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert first.status_code == 202, first.content
    instance_id = first.json()["instance"]["id"]

    probe = read_only.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert probe.status_code in (400, 403, 404), probe.content
    assert "Idempotent-Replayed" not in probe.headers and instance_id not in probe.content.decode()
    assert Instance.objects.count() == 1

    retry = write.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert (retry.status_code, retry.headers.get("Idempotent-Replayed")) == (202, "true")
    assert retry.json()["instance"]["id"] == instance_id and Instance.objects.count() == 1


def test_a_stored_answer_is_not_replayed_once_its_object_is_out_of_sight(world):
    """Same credential, but the created object is no longer visible to it (the token's user left the project's
    organization): the stored answer is dropped and the request runs as new, refused like any other."""
    write, _read_only = _two_tokens(world)
    body = {"name": "idem", "scope": "read", "project": str(world.project_a.pk)}
    first = write.post("/api/v1/tokens/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-9")
    assert first.status_code == 201, first.content
    ApiToken.objects.filter(pk=first.json()["id"]).update(user=User.objects.get(email="b@example.com"))  # now someone else's token
    again = write.post("/api/v1/tokens/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-9")
    assert "Idempotent-Replayed" not in again.headers
    assert again.status_code == 201 and again.json()["id"] != first.json()["id"], again.content
