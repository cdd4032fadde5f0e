"""A provider-side setup and one tenant on the real stack (`tests/e2e/stack.py`), through the HTTP API only, for
the Terraform provider's acceptance tests and its benchmark: the sample fleet, InfiniBand, a P_Key pool, a public
IP pool, a whole-GPU and a MIG flavor, an image, a price book; then an organization whose owner makes a project
and a write token bound to it (what a tenant gives Terraform). Node agents answer every host's commands.

    python -m tests.terraform.tenant    # a dev stack (E2E_REDIS_URL selects the Redis db); prints the env to use
"""
from __future__ import annotations

import os
import time
from types import SimpleNamespace

from tests.e2e.stack import ROOT, Api, Stack

H100 = "H100-SXM5-80GB"
MIG_HOST = "a-su2-n32"


def provider_setup(stack: Stack) -> SimpleNamespace:
    ops = Api(stack.base, stack.ops_token)
    billing = Api(stack.base, stack.billing_token)
    sample = (ROOT / "apps/inventory/fleets/sample.yaml").read_text()
    ops.post("fleet/import", {"document": sample, "dry_run": False}, expect=(200, 201))
    stack.start_infiniband()
    ops.post("pkey-pools", {"fabric": "ib-compute", "first_pkey": "0x0100", "last_pkey": "0x01ff"},
             expect=(200, 201))
    ops.post("public-ip-pools", {"name": "public", "cidr": "203.0.113.0/24", "first_ip": "203.0.113.10",
                                 "last_ip": "203.0.113.250", "gateway_ip": "203.0.113.1",
                                 "network_name": "physnet-public"}, expect=201)
    flavor_8x = ops.post("flavors", {
        "name": "h100-8x", "vcpus": 208, "memory_mib": 1835008, "disk_gib": 4000, "gpu_form": "gpu",
        "gpu_model": H100, "gpu_count": 8, "hugepages": True}, expect=201).json()
    flavor_1x = ops.post("flavors", {
        "name": "h100-1x", "vcpus": 26, "memory_mib": 229376, "disk_gib": 500, "gpu_form": "gpu",
        "gpu_model": H100, "gpu_count": 1}, expect=201).json()
    flavor_mig = ops.post("flavors", {
        "name": "h100-mig-3g40", "vcpus": 8, "memory_mib": 65536, "disk_gib": 100, "gpu_form": "mig",
        "gpu_model": H100, "mig_profile": "3g.40gb"}, expect=201).json()
    # A flavor no host can hold (16 GPUs; the sample fleet's hosts have 8): placement refuses it.
    flavor_huge = ops.post("flavors", {
        "name": "h100-16x", "vcpus": 208, "memory_mib": 1835008, "disk_gib": 4000, "gpu_form": "gpu",
        "gpu_model": H100, "gpu_count": 16}, expect=201).json()
    image = ops.post("images", {
        "name": "ubuntu-24-04", "os": "ubuntu", "os_version": "24.04",
        "source_url": "https://cloud-images.ubuntu.com/releases/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img",
        "checksum": "sha256:" + "ab" * 32}, expect=201).json()
    book = billing.post("price-books", {"name": "list prices", "currency": "USD",
                                        "effective_from": "2026-01-01T00:00:00Z"}, expect=201).json()
    for sku, model, price in (("flavor:name=h100-8x", "on_demand", "19.92"), ("flavor:name=h100-1x", "on_demand",
                                                                               "2.49"),
                              (f"gpu:model={H100}", "reserved", "1.79"), ("public_ip", "on_demand", "0.005")):
        billing.post(f"price-books/{book['id']}/prices", {
            "sku": sku, "sla_tier": "standard", "pricing_model": model, "unit": "hour", "unit_price": price,
            "billing_increment_seconds": 1, "minimum_seconds": 0}, expect=(200, 201))
    stack.agents.start(ops, MIG_HOST, mig=True)
    follower = stack.agents.follow_commands(ops)
    return SimpleNamespace(ops=ops, billing=billing, flavor_8x=flavor_8x, flavor_1x=flavor_1x,
                           flavor_mig=flavor_mig, flavor_huge=flavor_huge, image=image, follower=follower)


def onboard(stack: Stack, ops: Api, slug: str, owner_email: str) -> SimpleNamespace:
    """Staff create the organization; its owner accepts the invitation, signs in to the console, mints an
    organization token, creates a project and a write token bound to it (like the journey's step 2)."""
    org = ops.post("organizations", {
        "slug": slug, "name": slug.title(), "legal_name": f"{slug.title()} Inc.", "billing_email": f"ap@{slug}.example",
        "currency": "USD", "billing_timezone": "UTC", "plan": "enterprise", "default_sla_tier": "standard",
        "owner_email": owner_email}, expect=201).json()
    password = "correct horse battery staple"
    Api(stack.base).post("invitations/accept", {"token": stack.invitation_token(owner_email), "password": password,
                                                "full_name": f"{slug} owner"}, expect=(200, 201))
    console = Api(stack.base)
    csrf = console.get("session").json()["csrf_token"]
    console.s.headers["X-CSRFToken"] = csrf
    console.post("session", {"email": owner_email, "password": password}, expect=200)
    console.s.headers["X-CSRFToken"] = console.s.cookies.get("csrftoken", csrf)
    org_token = console.post("tokens", {"name": "owner", "scope": "write", "organization": org["id"]},
                             expect=201).json()["token"]
    owner = Api(stack.base, org_token)
    project = owner.post("projects", {"organization": org["id"], "slug": "training", "name": "Training"},
                         expect=201).json()
    token = owner.post("tokens", {"name": "terraform", "scope": "write", "project": project["id"]},
                       expect=201).json()["token"]
    return SimpleNamespace(org=org, owner=owner, org_token=org_token, project=project, token=token,
                           api=Api(stack.base, token))


if __name__ == "__main__":
    import secrets

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))   # this process only imports the models
    django.setup()
    s = Stack().start()
    setup = provider_setup(s)
    t = onboard(s, setup.ops, "acme", "cto@acme.example")
    print(f"export GPUCLOUD_ENDPOINT={s.base} GPUCLOUD_TOKEN={t.token} GPUCLOUD_PROJECT={t.project['id']}",
          flush=True)
    print(f"export OPS_TOKEN={s.ops_token} ORG_TOKEN={t.org_token}", flush=True)
    try:
        while True:
            time.sleep(5)
    except KeyboardInterrupt:
        pass
    finally:
        setup.follower.set()
        s.stop(keep_logs=bool(os.environ.get("KEEP_LOGS")))
