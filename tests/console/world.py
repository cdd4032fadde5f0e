"""What the console's browser tests need on their fresh e2e stack, made through the public API as staff would
(created only where missing): the sample fleet with MIG mode on one host and its agent, flavors, an image,
on-demand prices, and tenants that sign in with a password (staff create the organization; its owner accepts
the e-mailed invitation)."""
from __future__ import annotations

from types import SimpleNamespace

from tests.e2e.stack import ROOT, Api, Stack, poll

H100 = "H100-SXM5-80GB"
MIG_HOST = "a-su2-n32"   # the sample fleet's host whose GPUs the operator switched to MIG mode
PASSWORD = "correct horse battery staple"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc test@example"
SSH_KEY_FP = "SHA256:gDaWWthFRjg5/UIKbaq6OCohUpxgfs8xDhsxYWcGAGM"  # ssh-keygen -lf (OpenSSH 9.2)

MIG_FLAVOR = {"name": "h100-mig-3g40", "vcpus": 8, "memory_mib": 65536, "disk_gib": 100, "gpu_form": "mig",
              "gpu_model": H100, "mig_profile": "3g.40gb"}
WHOLE_FLAVOR = {"name": "h100-8x", "vcpus": 208, "memory_mib": 1835008, "disk_gib": 4000, "gpu_form": "gpu",
                "gpu_model": H100, "gpu_count": 8, "hugepages": True}
IMAGE = {"name": "ubuntu-24-04", "os": "ubuntu", "os_version": "24.04",
         "source_url": "https://cloud-images.ubuntu.com/releases/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img",
         "checksum": "sha256:" + "ab" * 32}


def one(api: Api, path: str, body: dict, **match) -> dict:
    found = [x for x in api.all(path) if all(x.get(k) == v for k, v in match.items())]
    return found[0] if found else api.post(path, body, expect=201).json()


def catalog(stack: Stack) -> SimpleNamespace:
    """The fleet, MIG host and agents, flavors, image and prices (created only where missing)."""
    ops, billing = Api(stack.base, stack.ops_token), Api(stack.base, stack.billing_token)
    if not ops.all("hosts", zone="eu-west-a"):
        sample = (ROOT / "apps/inventory/fleets/sample.yaml").read_text()
        ops.post("fleet/import", {"document": sample, "dry_run": False}, expect=(200, 201))
    flavor_mig = one(ops, "flavors", MIG_FLAVOR, name=MIG_FLAVOR["name"])
    flavor_8x = one(ops, "flavors", WHOLE_FLAVOR, name=WHOLE_FLAVOR["name"])
    image = one(ops, "images", IMAGE, name=IMAGE["name"])
    if not billing.all("price-books"):
        book = billing.post("price-books", {"name": "list prices", "currency": "USD",
                                            "effective_from": "2026-01-01T00:00:00Z"}, expect=201).json()
        for sku, price in (("flavor:name=h100-mig-3g40", "0.99"), ("flavor:name=h100-8x", "19.92")):
            for tier in ("standard", "premium"):
                billing.post(f"price-books/{book['id']}/prices", {
                    "sku": sku, "sla_tier": tier, "pricing_model": "on_demand", "unit": "hour", "unit_price": price,
                    "billing_increment_seconds": 1, "minimum_seconds": 60}, expect=(200, 201))
    stack.agents.start(ops, MIG_HOST, mig=True)   # no-op when the journey already runs it
    poll(lambda: {g["mode"] for g in ops.all("gpus", host=MIG_HOST)} == {"mig"}, timeout=60,
         what=f"{MIG_HOST}'s GPUs reported in MIG mode")
    follower = stack.agents.follow_commands(ops)
    return SimpleNamespace(ops=ops, billing=billing, flavor_mig=flavor_mig, flavor_8x=flavor_8x, image=image,
                           follower=follower)


def tenant(stack: Stack, ops: Api, slug: str, email: str) -> SimpleNamespace:
    """A new organization (staff) whose owner has accepted the invitation with `PASSWORD` and made a project."""
    t = organization_owner(stack, ops, slug, email)
    t.project = t.api.post("projects", {"organization": t.org["id"], "slug": "research", "name": "Research"},
                           expect=201).json()
    return t


def organization_owner(stack: Stack, ops: Api, slug: str, email: str) -> SimpleNamespace:
    """A new organization (staff) whose owner has accepted the invitation with `PASSWORD`: no project yet; `api` is
    the owner's signed-in session."""
    org = ops.post("organizations", {
        "slug": slug, "name": slug.title(), "legal_name": f"{slug.title()} Inc.", "billing_email": f"ap@{slug}.example",
        "currency": "USD", "billing_timezone": "UTC", "plan": "enterprise", "default_sla_tier": "standard",
        "owner_email": email}, expect=201).json()
    Api(stack.base).post("invitations/accept", {"token": stack.invitation_token(email), "password": PASSWORD,
                                                "full_name": f"{slug.title()} Owner"}, expect=(200, 201))
    browser = Api(stack.base)
    csrf = browser.get("session").json()["csrf_token"]
    browser.s.headers["X-CSRFToken"] = csrf
    browser.post("session", {"email": email, "password": PASSWORD}, expect=200)
    browser.s.headers["X-CSRFToken"] = browser.s.cookies.get("csrftoken", csrf)
    return SimpleNamespace(org=org, project=None, email=email, api=browser)


def invite(stack: Stack, owner: Api, org: dict, email: str, role: str) -> None:
    """`email` joins `org` with `role`, accepting the owner's invitation with `PASSWORD`."""
    owner.post("invitations", {"organization": org["id"], "email": email, "role": role}, expect=201)
    Api(stack.base).post("invitations/accept", {"token": stack.invitation_token(email), "password": PASSWORD},
                         expect=(200, 201))
