"""Terraform provider benchmark on the real stack (tests/e2e/stack.py): the example estate's apply time, and a
refresh-only plan over N existing resources (default 200: security group rules of one group).

Usage:
  PYTHONPATH=. .venv/bin/python bench/terraform.py [--count 200]

Builds the provider first when terraform/mirror/ is missing (make terraform-provider). The stack uses its own
database (`gpucloud_e2e_<pid>`, dropped afterwards) and Redis db 11 (override with E2E_REDIS_URL). Terraform runs
with its default parallelism (10). Figures are wall-clock seconds of whole terraform commands (provider start
and Terraform's own work included).

How much of the estate's apply is the product's own provisioning: the project's Operations (the API's
`GET /operations/`) created during the apply give `estate_provisioning_s`, the wall-clock time during which at
least one of them was running (the union of their `created_at`..`finished_at` intervals, so parallel operations
count once), and `estate_longest_operation_s` with its kind; `estate_provider_s` is the rest of the apply
(Terraform, the provider, the synchronous API calls and the provider's polling interval).

The last stdout line is JSON:
{"count", "estate_apply_s", "estate_provisioning_s", "estate_provider_s", "estate_longest_operation_s",
 "estate_longest_operation", "estate_operations", "estate_destroy_s", "create_n_s", "refresh_200_s",
 "refresh_per_resource_ms"}
(`refresh_200_s` is the refresh-only plan over `count` resources; the target is <= 20 s for 200).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def busy_seconds(operations: list[dict], since: dt.datetime, until: dt.datetime | None = None) -> tuple[float, int]:
    """The union of the `created_at`..`finished_at` intervals (seconds) of the operations created at or after
    `since` (ISO 8601 timestamps as the API gives them), cut at `until` (the end of the apply; default now: an
    operation still running after the apply, or finished after it, counts only up to then), and how many."""
    def ts(v: str) -> dt.datetime:
        return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))

    until = until or dt.datetime.now(dt.UTC)
    spans = sorted((ts(o["created_at"]), min(ts(o["finished_at"]), until) if o.get("finished_at") else until)
                   for o in operations if since <= ts(o["created_at"]) < until)
    total, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            total += (b - a).total_seconds()
            end = b
        elif b > end:
            total += (b - end).total_seconds()
            end = b
    return total, len(spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()

    import secrets

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))   # this process only imports the models
    django.setup()
    from tests.e2e.stack import Api, Stack
    from tests.terraform.tenant import onboard, provider_setup
    from tests.terraform.workspace import ESTATE, Workspace, require_provider

    require_provider()
    stack = Stack().start()
    setup = None
    try:
        setup = provider_setup(stack)
        t = onboard(stack, setup.ops, "bench", "cto@bench.example")
        env = {"GPUCLOUD_ENDPOINT": stack.base, "GPUCLOUD_TOKEN": t.token, "GPUCLOUD_PROJECT": t.project["id"]}
        out = {"count": args.count}

        estate = Workspace(env, "bench-estate")
        estate.write(ESTATE.read_text())
        today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today + dt.timedelta(days=7 - today.weekday())
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        estate.vars = {"ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5"
                                         "HrGCgc bench@example",
                       "org_token": t.org_token, "lease_start": start.strftime(fmt),
                       "lease_end": (start + dt.timedelta(days=7)).strftime(fmt)}
        estate.ok("init", "-no-color")
        began = dt.datetime.now(dt.UTC)
        out["estate_apply_s"] = round(estate.ok("apply", "-auto-approve", "-no-color").elapsed, 2)
        ended = dt.datetime.now(dt.UTC)
        print(f"estate apply (15 resources, 2-node cluster, VM): {out['estate_apply_s']} s", flush=True)
        tenant = Api(stack.base, t.token)
        ops = [o for o in tenant.all("operations") if o["created_at"] and
               dt.datetime.fromisoformat(o["created_at"].replace("Z", "+00:00")) >= began]
        busy, n = busy_seconds(ops, began, ended)
        out["estate_provisioning_s"] = round(busy, 2)
        out["estate_provider_s"] = round(out["estate_apply_s"] - busy, 2)
        out["estate_operations"] = n
        longest = max((o for o in ops if o["finished_at"]), key=lambda o: (dt.datetime.fromisoformat(o["finished_at"].replace("Z", "+00:00"))
                                          - dt.datetime.fromisoformat(o["created_at"].replace("Z", "+00:00"))),
                      default=None)
        if longest is not None:
            out["estate_longest_operation"] = longest["kind"]
            out["estate_longest_operation_s"] = round(
                (dt.datetime.fromisoformat(longest["finished_at"].replace("Z", "+00:00"))
                 - dt.datetime.fromisoformat(longest["created_at"].replace("Z", "+00:00"))).total_seconds(), 2)
        print(f"  of which the product's own provisioning ({n} operations, union of their run times): "
              f"{out['estate_provisioning_s']} s; longest {out.get('estate_longest_operation')} "
              f"{out.get('estate_longest_operation_s')} s; Terraform, provider and API calls: "
              f"{out['estate_provider_s']} s", flush=True)
        out["estate_destroy_s"] = round(estate.ok("destroy", "-auto-approve", "-no-color").elapsed, 2)
        print(f"estate destroy: {out['estate_destroy_s']} s", flush=True)

        many = Workspace(env, "bench-many")
        many.write("""terraform {
  required_providers {
    gpucloud = { source = "gpucloud.local/gpucloud/gpucloud", version = "0.1.0" }
  }
}
provider "gpucloud" {}
variable "n" { type = number }
resource "gpucloud_vpc" "v" {
  name = "bench"
  cidr = "10.20.0.0/16"
}
resource "gpucloud_security_group" "g" {
  vpc  = gpucloud_vpc.v.id
  name = "bench"
}
resource "gpucloud_security_group_rule" "r" {
  count            = var.n
  security_group   = gpucloud_security_group.g.id
  direction        = "ingress"
  protocol         = "tcp"
  port_range_min   = 1000 + count.index
  port_range_max   = 1000 + count.index
  remote_ip_prefix = "10.0.0.0/8"
}
""")
        many.vars = {"n": args.count - 2}
        many.ok("init", "-no-color")
        out["create_n_s"] = round(many.ok("apply", "-auto-approve", "-no-color").elapsed, 2)
        print(f"create {args.count} resources: {out['create_n_s']} s", flush=True)
        r = many.ok("plan", "-refresh-only", "-no-color")
        out["refresh_200_s"] = round(r.elapsed, 2)
        out["refresh_per_resource_ms"] = round(1000 * r.elapsed / args.count, 1)
        print(f"refresh-only plan over {args.count} resources: {out['refresh_200_s']} s", flush=True)
        before = (many.dir / "terraform.tfstate").read_text()
        many.ok("apply", "-refresh-only", "-auto-approve", "-no-color")
        after = json.loads((many.dir / "terraform.tfstate").read_text())
        old = json.loads(before)
        diff = [(r["type"], i, k) for r0, r in zip(old["resources"], after["resources"], strict=True)
                for i, (a, b) in enumerate(zip(r0["instances"], r["instances"], strict=True))
                for k in set(a["attributes"]) | set(b["attributes"]) if a["attributes"].get(k) != b["attributes"].get(k)]
        print(f"attributes a refresh changed: {diff[:10]} ({len(diff)})", flush=True)
        many.ok("destroy", "-auto-approve", "-no-color")
        estate.cleanup()
        many.cleanup()
    finally:
        if setup is not None:
            setup.follower.set()
        stack.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
