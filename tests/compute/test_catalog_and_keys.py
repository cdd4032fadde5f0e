"""Flavors, images and SSH keys."""
from __future__ import annotations

import pytest

from apps.compute.services.ssh_keys import ssh_key_parse
from apps.core.errors import ValidationFailed

from .conftest import ED25519, ED25519_FP

pytestmark = pytest.mark.django_db


def test_fingerprint_matches_ssh_keygen():
    assert ssh_key_parse(ED25519) == (ED25519, ED25519_FP)


@pytest.mark.parametrize("bad", [
    "", "ssh-ed25519", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ssh-ed25519 not!base64",
    "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==",  # an RSA blob under an ed25519 label
    ED25519 + "\nssh-ed25519 AAAA",
])
def test_invalid_keys_are_refused(bad):
    with pytest.raises(ValidationFailed) as exc:
        ssh_key_parse(bad)
    assert exc.value.code == "invalid_ssh_key"


def test_ssh_key_api_create_list_conflict_delete(world):
    body = {"project": str(world.project_a.pk), "name": "laptop", "public_key": ED25519}
    created = world.client_a.post("/api/v1/ssh-keys/", body, format="json")
    assert created.status_code == 201 and created.data["fingerprint"] == ED25519_FP
    dup = world.client_a.post("/api/v1/ssh-keys/", {**body, "name": "again"}, format="json")
    assert (dup.status_code, dup.json()["code"]) == (409, "ssh_key_exists")
    # the same key under another name: the public key field is the one named, with the key that has it
    assert dup.json()["errors"] == {"public_key": [f"Already added as 'laptop' ({ED25519_FP})."]}
    named = world.client_a.post("/api/v1/ssh-keys/", {**body, "public_key": "ssh-ed25519 "
                                                      "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
                                format="json")
    assert (named.status_code, list(named.json().get("errors") or {})) == (409, ["name"]), named.content
    assert [k["name"] for k in world.client_a.get("/api/v1/ssh-keys/").json()["results"]] == ["laptop"]
    assert world.client_b.get("/api/v1/ssh-keys/").json()["results"] == []
    assert world.client_a.delete(f"/api/v1/ssh-keys/{created.data['id']}/").status_code == 204


def test_flavor_visibility(world):
    names = lambda c: sorted(f["name"] for f in c.get("/api/v1/flavors/").json()["results"])  # noqa: E731
    assert names(world.client_a) == ["c2", "g1-h100", "mig-3g40"]
    assert names(world.client_b) == ["b-only", "c2", "g1-h100", "mig-3g40"]
    assert world.client_a.get(f"/api/v1/flavors/{world.private_b.pk}/").status_code == 404


def test_staff_creates_flavors_checked_against_the_catalog(world):
    ok = world.staff_client.post("/api/v1/flavors/", {
        "name": "mig-1g10", "vcpus": 2, "memory_mib": 8192, "gpu_form": "mig", "gpu_model": "H100-SXM5-80GB",
        "mig_profile": "1g.10gb"}, format="json")
    assert ok.status_code == 201, ok.content
    bad = world.staff_client.post("/api/v1/flavors/", {
        "name": "mig-bad", "vcpus": 2, "memory_mib": 8192, "gpu_form": "mig", "gpu_model": "H100-SXM5-80GB",
        "mig_profile": "3g.71gb"}, format="json")
    assert (bad.status_code, bad.json()["code"], list(bad.json()["errors"])) == (400, "invalid_flavor",
                                                                                  ["mig_profile"])
    tenant = world.client_a.post("/api/v1/flavors/", {"name": "x", "vcpus": 1, "memory_mib": 1024}, format="json")
    assert tenant.status_code == 403


def test_demo_catalog_loads_idempotently_and_matches_the_gpu_catalog():
    import io

    from apps.compute.demo import FLAVORS, load_demo
    from apps.compute.models import Flavor
    from apps.compute.services.catalog import _validate_gpu_spec

    for f in FLAVORS:
        _validate_gpu_spec({"gpu_form": "none", **f})
    out = io.StringIO()
    load_demo(out)
    load_demo(out)
    assert Flavor.objects.count() == len(FLAVORS)
    assert out.getvalue().splitlines()[1] == f"compute: 0 demo flavors and 0 image created ({len(FLAVORS)} flavors" \
                                             " in the demo catalog)"
