"""Acceptance tests of the Terraform provider (terraform/) against the real running service (the e2e stack):
`terraform init` from the filesystem mirror, the example estate applied, planned again (empty), updated in place,
a forced replacement, drift both ways, import of every resource type, a SIGKILLed apply run again, an unplaceable
flavor, bad configuration at plan time, credential and endpoint diagnostics, destroy. One module-scoped
workspace; each test runs as few terraform commands as it can (each costs ~2 s).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import signal
import time
import uuid
from types import SimpleNamespace

import pytest

from tests.e2e.stack import Stack, free_port, poll

from .tenant import onboard, provider_setup
from .workspace import ESTATE, Workspace, require_provider

pytestmark = pytest.mark.e2e

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc test@example"
# A second key, for workspaces beside the estate (a project holds a public key once).
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBdmRHppf5RqCIn97Kx40xPfhjUhuA9K8cCKFlnnze+M later@example"
TYPES = ["api_token", "cluster", "ib_partition", "ib_partition", "ib_partition_member", "instance", "lease", "project",
         "public_ip", "security_group", "security_group_rule", "ssh_key", "subnet", "vpc", "webhook_endpoint"]
HEADER = """terraform {
  required_providers {
    gpucloud = { source = "gpucloud.local/gpucloud/gpucloud", version = "0.1.0" }
  }
}
provider "gpucloud" {}
"""
W = SimpleNamespace()


def _week_from_now():
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today + dt.timedelta(days=7 - today.weekday())   # next Monday 00:00 UTC
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return start.strftime(fmt), (start + dt.timedelta(days=7)).strftime(fmt)


@pytest.fixture(scope="module")
def stack(request):
    require_provider()
    s = Stack().start()
    W.stack = s
    try:
        W.setup = provider_setup(s)
        W.t = onboard(s, W.setup.ops, "acme", "cto@acme.example")
        W.env = {"GPUCLOUD_ENDPOINT": s.base, "GPUCLOUD_TOKEN": W.t.token, "GPUCLOUD_PROJECT": W.t.project["id"]}
        W.ws = Workspace(W.env, "estate")
        W.ws.write(ESTATE.read_text())
        start, end = _week_from_now()
        # As `file("~/.ssh/id_ed25519.pub")` reads it: with the trailing newline the API strips (test_08 imports it).
        W.ws.vars = {"ssh_public_key": SSH_KEY + "\n", "org_token": W.t.org_token, "lease_start": start, "lease_end": end}
        yield s
    finally:
        if getattr(W, "setup", None):
            W.setup.follower.set()
        failed = bool(request.module.__dict__.get("_FAILED_STEPS"))
        if getattr(W, "ws", None) and not failed:
            W.ws.cleanup()
        s.stop(keep_logs=failed)


@pytest.fixture
def w(request, stack):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return W


def _open_allocations(w) -> list[dict]:
    return [a for a in w.setup.ops.all("allocations", project=w.t.project["id"]) if a["end"] is None]


def _live(api, collection: str, **params) -> list[dict]:
    return [x for x in api.all(collection, **params) if x.get("status") not in ("deleted", "cancelled")]


# ---------------------------------------------------------------------------------------------------------------
def test_01_init_installs_the_provider_from_the_mirror(w):
    r = w.ws.ok("init", "-no-color")
    assert "Installed gpucloud.local/gpucloud/gpucloud v0.1.0" in r.out, r.out


def test_02_bad_configuration_fails_at_plan_on_the_attribute(w):
    bad = Workspace(w.env, "bad")
    try:
        bad.write(HEADER + """
resource "gpucloud_vpc" "v" {
  name = "v"
  cidr = "10.0.0.1/33"
}
""")
        bad.ok("init", "-no-color")
        r = bad.run("plan", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "Invalid cidr '10.0.0.1/33'" in text, r.out
        assert 'cidr = "10.0.0.1/33"' in text, r.out   # the diagnostic points at the attribute
        # Static mistakes: errors on the attribute at validate time (no API call).
        past = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        bad.write(HEADER + f"""
resource "gpucloud_cluster" "c" {{
  name   = "c"
  flavor = "{uuid.uuid4()}"
  image  = "{w.setup.image['id']}"
  size   = -1
}}
resource "gpucloud_lease" "n" {{
  name      = "n"
  start     = "2030-01-01T00:00:00Z"
  end       = "2030-01-02T00:00:00Z"
  kind      = "gpus"
  gpu_model = "H100-SXM5-80GB"
  quantity  = -3
}}
resource "gpucloud_lease" "d" {{
  name      = "d"
  start     = "not-a-date"
  end       = "2030-01-02T00:00:00Z"
  kind      = "gpus"
  gpu_model = "H100-SXM5-80GB"
  quantity  = 1
}}
""")
        r = bad.run("validate", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1, r.out
        for summary, line in (("Invalid size", "size = -1"), ("Invalid quantity", "quantity = -3"),
                              ("Invalid start 'not-a-date'", 'start = "not-a-date"')):
            assert text.count(summary) == 1 and line in text, (summary, r.out)
        # Plan-time launch checks (POST /clusters/check/; a lease's window against the clock): on the attribute.
        bad.write(HEADER + f"""
resource "gpucloud_cluster" "c" {{
  name   = "c"
  flavor = "{uuid.uuid4()}"
  image  = "{w.setup.image['id']}"
  size   = 1
}}
resource "gpucloud_lease" "l" {{
  name      = "l"
  start     = "{past}"
  end       = "{later}"
  kind      = "gpus"
  gpu_model = "H100-SXM5-80GB"
  quantity  = 1
}}
""")
        r = bad.run("plan", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1, r.out
        for attr, line in (("flavor", "flavor = "), ("start", f'start = "{past}"')):
            assert len(re.findall(rf"is invalid: {attr}: ", text)) == 1, (attr, r.out)   # reported once
            assert line in text, (attr, r.out)
        # A token with no binding: the provider's project when it has one, else an error at plan (not at apply).
        bad.write(HEADER + 'resource "gpucloud_api_token" "t" {\n  name = "t"\n}\n')
        r = bad.ok("plan", "-no-color")
        assert re.search(rf'project\s+= "{w.t.project["id"]}"', r.out), r.out
        r = bad.ok("plan", "-no-color", env={"GPUCLOUD_PROJECT": "training"})   # the project's slug
        assert re.search(rf'project\s+= "{w.t.project["id"]}"', r.out), r.out
        r = bad.run("plan", "-no-color", env={"GPUCLOUD_PROJECT": "nosuch"})
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "The provider's project 'nosuch' is not a project of this token" in text, r.out
        r = bad.run("plan", "-no-color", env={"GPUCLOUD_PROJECT": ""})
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "gpucloud_api_token needs a binding: set `project` or `organization`" in text, \
            r.out
        # An unknown flavor by name: the data source says which flavors exist.
        bad.write(HEADER + 'data "gpucloud_flavor" "f" {\n  name = "h100-3x"\n}\n')
        r = bad.run("plan", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "no flavor matches (name=h100-3x)" in text, r.out
        assert "h100-8x" in text and "h100-mig-3g40" in text, r.out
        assert _live(w.t.api, "clusters") == [] and _live(w.t.api, "leases") == []   # checks write nothing
    finally:
        bad.cleanup()


def test_02b_capacity_says_placeable_now_and_when(w):
    """data.gpucloud_capacity with a flavor: the API's launch check (the create's decision, rolled back)."""
    c = Workspace(w.env, "capacity")
    try:
        c.write(HEADER + f"""
data "gpucloud_capacity" "mig" {{
  flavor  = "{w.setup.flavor_mig['id']}"
  project = "training"
}}
data "gpucloud_quotas" "by_slug" {{
  project = "training"
}}
data "gpucloud_capacity" "huge" {{
  flavor = "{w.setup.flavor_huge['id']}"
}}
data "gpucloud_capacity" "many" {{
  flavor         = "{w.setup.flavor_8x['id']}"
  instance_count = 200
  image          = "{w.setup.image['id']}"
}}
output "mig" {{ value = data.gpucloud_capacity.mig }}
output "huge" {{ value = data.gpucloud_capacity.huge }}
output "many" {{ value = data.gpucloud_capacity.many }}
output "quotas" {{ value = data.gpucloud_quotas.by_slug }}
""")
        c.ok("init", "-no-color")
        c.ok("apply", "-auto-approve", "-no-color")
        out = {k: v["value"] for k, v in c.state()["values"]["outputs"].items()}
        assert (out["mig"]["placeable"], out["mig"]["code"], out["mig"]["buckets"]) == (True, None, []), out["mig"]
        # `project` by slug, as the provider's setting takes it: the project's quotas
        pid = w.t.project["id"]
        assert out["quotas"]["id"] == f"quotas-{pid}", out["quotas"]
        assert {(q["scope"], q["resource"], q["limit"]) for q in out["quotas"]["quotas"]} == {
            (q["scope"], q["resource"], q["limit"]) for q in w.t.api.all("quotas", project=pid)}, out["quotas"]
        # 16 GPUs: no host has them (and it may exceed the quota, which the check reports first)
        assert out["huge"]["placeable"] is False and out["huge"]["code"] in ("unplaceable", "quota_exceeded"), \
            out["huge"]
        assert out["huge"]["detail"], out["huge"]
        assert out["many"]["placeable"] is False, out["many"]
        assert out["many"]["code"] in ("unplaceable", "capacity_unavailable", "quota_exceeded"), out["many"]
        # Neither answer created anything.
        assert _live(w.t.api, "instances") == [] and _live(w.t.api, "clusters") == []
        # instance_count > 1 is a cluster's check, which needs the image: said at plan, on the attribute.
        c.write(HEADER + f'data "gpucloud_capacity" "x" {{\n  flavor = "{w.setup.flavor_8x["id"]}"\n'
                         f'  instance_count = 2\n}}\n')
        r = c.run("plan", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "`instance_count` > 1 needs `image`" in text, r.out
        # More than the largest cluster: at validate, on the attribute, named as the configuration names it.
        c.write(HEADER + f'data "gpucloud_capacity" "x" {{\n  flavor = "{w.setup.flavor_8x["id"]}"\n'
                         f'  instance_count = 500\n  image = "{w.setup.image["id"]}"\n}}\n'
                         f'resource "gpucloud_cluster" "c" {{\n  name = "c"\n  flavor = "{w.setup.flavor_8x["id"]}"\n'
                         f'  image = "{w.setup.image["id"]}"\n  size = 300\n}}\n')
        r = c.run("validate", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "instance_count is 500: at most 256" in text, r.out
        assert "instance_count = 500" in text and "size:" not in text, r.out
        assert "size is 300: a cluster has at most 256 instances" in text and "size = 300" in text, r.out
        # A project the token does not see: the data source says which it sees.
        c.write(HEADER + 'data "gpucloud_quotas" "q" {\n  project = "nosuch"\n}\n')
        r = c.run("plan", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "gpucloud_quotas: project 'nosuch' is not a project of this token" in text, r.out
        assert f"training ({w.t.project['id']})" in text, r.out
    finally:
        c.cleanup()


def test_03_apply_the_example_estate(w):
    r = w.ws.ok("apply", "-auto-approve", "-no-color")
    assert "Apply complete! Resources: 15 added, 0 changed, 0 destroyed." in r.out, r.out[-3000:]
    w.estate_apply_s = r.elapsed
    api, pid = w.t.api, w.t.project["id"]
    state = w.ws.managed()
    assert sorted(a.split(".")[0].removeprefix("gpucloud_") for a in state) == TYPES
    cluster = api.get(f"clusters/{state['gpucloud_cluster.train']['id']}").json()
    assert cluster["status"] == "active" and len(cluster["members"]) == 2, cluster
    for m in cluster["members"]:
        inst = api.get(f"instances/{m}").json()
        assert inst["status"] == "active" and state["gpucloud_ib_partition.train"]["id"] in [
            p["id"] for p in inst["ib_partitions"]], inst
    storage = api.get(f"ib-partitions/{state['gpucloud_ib_partition.storage']['id']}").json()
    first = api.get(f"instances/{cluster['members'][0]}").json()   # ib_guids are in member order
    guid = state["gpucloud_cluster.train"]["ib_guids"][0]
    assert guid in [m["guid"] for p in first["ib_partitions"] for m in p["members"]], (guid, first)
    assert [(m["guid"], m["membership"], m["instance_id"]) for m in storage["members"]] == [
        (guid, "limited", first["id"])], storage
    vm = api.get(f"instances/{state['gpucloud_instance.notebook']['id']}").json()
    assert vm["status"] == "active" and vm["network"]["subnet"] == state["gpucloud_subnet.nodes"]["id"], vm
    fip = api.get(f"public-ips/{state['gpucloud_public_ip.notebook']['id']}").json()
    assert fip["port"] == vm["ports"][0]["id"] and fip["address"].startswith("203.0.113."), fip
    lease = api.get(f"leases/{state['gpucloud_lease.next_week']['id']}").json()
    assert lease["status"] == "confirmed" and lease["count"] == 2, lease
    assert state["gpucloud_api_token.ci"]["token"].startswith("gpc_")
    assert state["gpucloud_webhook_endpoint.ops"]["secret"]
    assert [v["name"] for v in api.all("vpcs", project=pid)] == ["main"]
    outputs = w.ws.state()["values"]["outputs"]
    assert outputs["quotas"]["value"] == {f"{q['scope']}/{q['resource']}": q["limit"]
                                          for q in api.all("quotas", project=pid)}, outputs
    assert outputs["capacity_days"]["value"] == 7, outputs


def test_04_second_plan_is_empty(w):
    r = w.ws.run("plan", "-detailed-exitcode", "-no-color")
    assert r.returncode == 0, r.out


def test_05_update_in_place_sends_if_match(w):
    w.ws.vars["vpc_description"] = "training networks, v2"
    r = w.ws.ok("apply", "-auto-approve", "-no-color")
    assert "Resources: 0 added, 1 changed, 0 destroyed." in r.out, r.out[-3000:]
    vpc_id = w.ws.managed()["gpucloud_vpc.main"]["id"]
    assert w.t.api.get(f"vpcs/{vpc_id}").json()["description"] == "training networks, v2"


def test_05b_update_of_an_object_changed_since_the_plan_is_refused(w):
    """The PATCH carries If-Match with the ETag of the plan's refresh: a change made between plan and apply is a
    412, reported, and nothing is written."""
    vpc_id = w.ws.managed()["gpucloud_vpc.main"]["id"]
    w.ws.vars["vpc_description"] = "v3"
    w.ws.ok("plan", "-out=tfplan", "-no-color")
    w.t.api.patch(f"vpcs/{vpc_id}", {"description": "edited after the plan"})
    r = w.ws.run("apply", "-no-color", "tfplan")
    text = re.sub(r"\s+", " ", r.out)
    assert r.returncode == 1 and "it changed since it was last read (HTTP 412)" in text, r.out
    assert w.t.api.get(f"vpcs/{vpc_id}").json()["description"] == "edited after the plan"
    w.t.api.patch(f"vpcs/{vpc_id}", {"description": "training networks, v2"})
    w.ws.vars["vpc_description"] = "training networks, v2"


def test_06_forced_replacement(w):
    old = w.ws.managed()["gpucloud_security_group_rule.ssh_in"]["id"]
    w.ws.vars["ssh_port"] = 2222
    r = w.ws.ok("apply", "-auto-approve", "-no-color")
    assert "Resources: 1 added, 0 changed, 1 destroyed." in r.out, r.out[-3000:]
    new = w.ws.managed()["gpucloud_security_group_rule.ssh_in"]["id"]
    assert new != old
    w.t.api.get(f"security-group-rules/{old}", expect=404)
    assert w.t.api.get(f"security-group-rules/{new}").json()["port_range_min"] == 2222


def test_07_drift_deleted_and_changed_behind_terraforms_back(w):
    state = w.ws.managed()
    rule, vpc = state["gpucloud_security_group_rule.ssh_in"]["id"], state["gpucloud_vpc.main"]["id"]
    w.t.api.delete(f"security-group-rules/{rule}")
    w.t.api.patch(f"vpcs/{vpc}", {"description": "changed in the console"})
    r = w.ws.run("apply", "-auto-approve", "-no-color")
    assert r.returncode == 0, r.out
    text = r.out
    assert "gpucloud_security_group_rule.ssh_in will be created" in text, text
    assert re.search(r'~ description\s+= "changed in the console" -> "training networks, v2"', text), text
    assert "Resources: 1 added, 1 changed, 0 destroyed." in text, text
    assert w.t.api.get(f"vpcs/{vpc}").json()["description"] == "training networks, v2"


def test_08_import_every_resource_type_then_plan_is_empty(w):
    state = w.ws.managed()
    w.ws.ok("state", "rm", *state)
    w.ws.write("".join(f'import {{\n  to = {a}\n  id = "{v["id"]}"\n}}\n' for a, v in state.items()),
               "imports.tf")
    r = w.ws.ok("apply", "-auto-approve", "-no-color")
    assert "Resources: 15 imported, 0 added, 0 changed, 0 destroyed." in r.out, r.out[-4000:]
    w.ws.remove("imports.tf")
    r = w.ws.run("plan", "-detailed-exitcode", "-no-color")
    assert r.returncode == 0, r.out[-4000:]   # user_data included: the API's digest matches the configured text
    state = w.ws.managed()
    for a in ("gpucloud_instance.notebook", "gpucloud_cluster.train"):
        assert state[a]["user_data"] is None and state[a]["user_data_sha256"] == hashlib.sha256(
            b"#cloud-config\npackage_update: true\npackages: [nvtop]\n").hexdigest(), state[a]
    # Another user_data than the one the instance was created with: a replacement (user data is create-only).
    w.ws.write('resource "gpucloud_instance" "notebook" {\n  user_data = "#cloud-config\\n{}\\n"\n}\n',
               "user_data_override.tf")
    try:
        text = re.sub(r"\s+", " ", w.ws.run("plan", "-no-color").out)
    finally:
        w.ws.remove("user_data_override.tf")
    assert "gpucloud_instance.notebook must be replaced" in text and "1 to add" in text and "1 to destroy" in text, \
        text[-4000:]
    assert re.search(r'\+ user_data\s*= (<<-EOT|"[^"]*") # forces replacement', text), text[-4000:]


def test_09_sigkill_during_cluster_create_then_apply_adopts_it(w):
    k = Workspace(w.env, "kill")
    w.kill_ws = k
    state = w.ws.managed()
    k.write(HEADER + f"""
resource "gpucloud_cluster" "k" {{
  name      = "killed"
  flavor    = "{w.setup.flavor_1x['id']}"
  image     = "{w.setup.image['id']}"
  size      = 2
  subnet_id = "{state['gpucloud_subnet.nodes']['id']}"
}}
""")
    k.ok("init", "-no-color")
    p = k.start("apply", "-auto-approve", "-no-color")
    poll(lambda: w.t.api.all("clusters", name="killed"), timeout=60, interval=0.2, what="the cluster created")
    k.kill(p)
    killed_output = p.stdout.read()
    assert "Creation complete" not in killed_output, killed_output   # killed while the create was waiting
    assert k.managed() == {}   # nothing reached the state: the next apply creates "again"
    r = k.ok("apply", "-auto-approve", "-no-color")
    assert "gpucloud_cluster.k: Creation complete" in r.out, r.out[-3000:]
    clusters = _live(w.t.api, "clusters", name="killed")
    assert len(clusters) == 1, clusters
    assert k.managed()["gpucloud_cluster.k"]["id"] == clusters[0]["id"]
    members = set(clusters[0]["members"])
    live = {i["id"] for i in _live(w.t.api, "instances")}
    assert members <= live and len(members) == 2
    assert {a["consumer"] for a in _open_allocations(w)} <= live | {x["id"] for x in _live(w.t.api, "leases")}
    k.ok("destroy", "-auto-approve", "-no-color")
    assert _live(w.t.api, "clusters", name="killed") == []


def test_09b_ctrl_c_during_cluster_create_keeps_it_in_state(w):
    """Ctrl-C reaches terraform and the plugin (one process group); Terraform stops the provider through
    StopProvider, and the cluster being created is recorded (tainted), not lost."""
    k = w.kill_ws
    state = w.ws.managed()
    k.write(HEADER + f"""
resource "gpucloud_cluster" "i" {{
  name      = "interrupted"
  flavor    = "{w.setup.flavor_1x['id']}"
  image     = "{w.setup.image['id']}"
  size      = 2
  subnet_id = "{state['gpucloud_subnet.nodes']['id']}"
}}
""")
    p = k.start("apply", "-auto-approve", "-no-color")
    poll(lambda: w.t.api.all("clusters", name="interrupted"), timeout=60, interval=0.2, what="the cluster created")
    os.killpg(p.pid, signal.SIGINT)
    out = p.communicate(timeout=120)[0]
    assert "Plugin did not respond" not in out and "panic" not in out, out
    assert "Creation complete" not in out, out   # interrupted while the create was waiting
    clusters = _live(w.t.api, "clusters", name="interrupted")
    assert len(clusters) == 1, clusters
    assert k.managed()["gpucloud_cluster.i"]["id"] == clusters[0]["id"], out
    k.ok("destroy", "-auto-approve", "-no-color")
    assert _live(w.t.api, "clusters", name="interrupted") == []


def test_09c_arguments_from_objects_of_the_same_apply_plan_and_apply(w):
    """The plan-time launch checks run only when every argument they would send is known: an instance whose subnet,
    a cluster whose SSH key and subnet, and leases whose names come from objects this same apply creates plan
    (their checks are skipped, not judged without those arguments) and apply."""
    state = w.ws.managed()
    vpc, sg = state["gpucloud_vpc.main"]["id"], state["gpucloud_security_group.ssh"]["id"]
    start, end = w.ws.vars["lease_start"], w.ws.vars["lease_end"]
    ws = Workspace(w.env, "unknowns")

    def lease(label, name):
        return f"""
resource "gpucloud_lease" "{label}" {{
  name      = {name}
  start     = "{start}"
  end       = "{end}"
  kind      = "gpus"
  gpu_model = "H100-SXM5-80GB"
  quantity  = 1
}}
"""
    try:
        ws.write(HEADER + f"""
resource "gpucloud_ssh_key" "k" {{
  name       = "later"
  public_key = "{OTHER_KEY}"
}}
resource "gpucloud_subnet" "new" {{
  vpc  = "{vpc}"
  name = "later"
  cidr = "10.10.7.0/24"
}}
resource "gpucloud_instance" "vm" {{
  name               = "late-vm"
  flavor             = "{w.setup.flavor_1x['id']}"
  image              = "{w.setup.image['id']}"
  subnet_id          = gpucloud_subnet.new.id
  security_group_ids = ["{sg}"]
}}
resource "gpucloud_cluster" "c" {{
  name               = "late-cluster"
  flavor             = "{w.setup.flavor_1x['id']}"
  image              = "{w.setup.image['id']}"
  size               = 2
  ssh_keys           = [gpucloud_ssh_key.k.id]
  subnet_id          = gpucloud_subnet.new.id
  security_group_ids = ["{sg}"]
}}
""" + lease("by_id", "gpucloud_ssh_key.k.id") + lease("by_prefix", '"big-${gpucloud_ssh_key.k.fingerprint}"'))
        ws.ok("init", "-no-color")
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 6 added, 0 changed, 0 destroyed." in r.out, r.out[-4000:]
        got = ws.managed()
        key, subnet = got["gpucloud_ssh_key.k"], got["gpucloud_subnet.new"]["id"]
        vm = w.t.api.get(f"instances/{got['gpucloud_instance.vm']['id']}").json()
        assert vm["status"] == "active" and vm["network"]["subnet"] == subnet, vm
        assert vm["network"]["security_groups"] == [sg], vm
        c = w.t.api.get(f"clusters/{got['gpucloud_cluster.c']['id']}").json()
        assert c["status"] == "active" and len(c["members"]) == 2, c
        assert got["gpucloud_cluster.c"]["ssh_keys"] == [key["id"]], got["gpucloud_cluster.c"]
        names = {w.t.api.get(f"leases/{got[a]['id']}").json()["name"]
                 for a in ("gpucloud_lease.by_id", "gpucloud_lease.by_prefix")}
        assert names == {key["id"], f"big-{key['fingerprint']}"}, names
        assert ws.run("plan", "-detailed-exitcode", "-no-color").returncode == 0
        r = ws.ok("destroy", "-auto-approve", "-no-color")
        assert "Destroy complete! Resources: 6 destroyed." in r.out, r.out[-3000:]
    finally:
        ws.cleanup()


def test_09d_an_update_is_checked_at_plan_as_a_create_is(w):
    """A lease already applied: a quantity below 1, a start that is not an instant, or a start moved into the past
    are errors on the attribute at plan time (not an "update in-place" that fails at apply); nothing is sent."""
    ws = Workspace(w.env, "lease-update")
    start, end = w.ws.vars["lease_start"], w.ws.vars["lease_end"]
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def config(start=start, quantity=1):
        return HEADER + f"""
resource "gpucloud_lease" "l" {{
  name      = "checked"
  start     = "{start}"
  end       = "{end}"
  kind      = "gpus"
  gpu_model = "H100-SXM5-80GB"
  quantity  = {quantity}
}}
"""
    try:
        ws.write(config())
        ws.ok("init", "-no-color")
        ws.ok("apply", "-auto-approve", "-no-color")
        lease_id = ws.managed()["gpucloud_lease.l"]["id"]
        for cfg, summary, line in (
                (config(quantity=-1), "Invalid quantity", "quantity = -1"),
                (config(start="not-a-date"), "Invalid start 'not-a-date'", 'start = "not-a-date"'),
                (config(start=past), f"gpucloud_lease is invalid: start: {past} is in the past",
                 f'start = "{past}"')):
            ws.write(cfg)
            r = ws.run("plan", "-no-color")
            text = re.sub(r"\s+", " ", r.out)
            assert r.returncode == 1 and summary in text and line in text, r.out[-3000:]
            assert "update in-place" not in text, r.out[-3000:]
        lease = w.t.api.get(f"leases/{lease_id}").json()
        assert (lease["count"], lease["status"]) == (1, "confirmed"), lease
        # What only the API refuses (its update has no dry run) fails at apply, in Terraform's words: the
        # attribute is `quantity` throughout the diagnostic, never the API's `count`.
        ws.write(config(quantity=100000))
        r = ws.run("apply", "-auto-approve", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "quantity must be" in text, r.out[-3000:]
        assert not re.search(r"\bcount\b", text), r.out[-3000:]
        ws.write(config())
        ws.ok("destroy", "-auto-approve", "-no-color")
    finally:
        ws.cleanup()


def test_10_unplaceable_flavor_fails_fast_with_the_explanation(w):
    u = Workspace(w.env, "unplaceable")
    key = f"""
resource "gpucloud_ssh_key" "k" {{
  name       = "unplaceable"
  public_key = "{OTHER_KEY}"
}}
"""
    try:
        u.write(HEADER + key)
        u.ok("init", "-no-color")
        u.ok("apply", "-auto-approve", "-no-color")
        u.write(HEADER + key + f"""
resource "gpucloud_instance" "big" {{
  name   = "big"
  flavor = "{w.setup.flavor_huge['id']}"
  image  = "{w.setup.image['id']}"
}}
""")
        t0 = time.monotonic()
        r = u.run("apply", "-auto-approve", "-no-color")
        took = time.monotonic() - t0
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1, r.out
        assert took < 10, (took, r.out)
        assert re.search(r"unplaceable|capacity_unavailable", text) and "explanation" in text, r.out
        assert "earliest_start" in text, r.out
        assert _live(w.t.api, "instances", name="big") == []
        # Destroying what was created runs no create check: the unplaceable instance does not block it.
        for args in (("plan", "-destroy"), ("destroy", "-auto-approve")):
            r = u.run(*args, "-no-color")
            assert r.returncode == 0 and "cannot be created" not in r.out, r.out[-3000:]
        assert "Destroy complete! Resources: 1 destroyed." in r.out, r.out[-3000:]
        assert w.t.api.all("ssh-keys", name="unplaceable") == []
    finally:
        u.cleanup()


def test_11_wrong_token_and_unreachable_endpoint(w):
    d = Workspace(w.env, "creds")
    try:
        d.write(HEADER + 'data "gpucloud_regions" "all" {}\n')
        d.ok("init", "-no-color")
        r = d.run("plan", "-no-color", env={"GPUCLOUD_TOKEN": "gpc_000000000000_not-a-real-token"})
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and "the API token was refused (HTTP 401" in text, r.out
        port = free_port()
        r = d.run("plan", "-no-color", env={"GPUCLOUD_ENDPOINT": f"http://127.0.0.1:{port}"})
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1 and f"gpucloud API unreachable at http://127.0.0.1:{port}" in text, r.out
        # An endpoint that answers, but not as the API (the web console's HTML under a wrong base URL).
        r = d.run("plan", "-no-color", env={"GPUCLOUD_ENDPOINT": f"{w.stack.base}/nothere"})
        text = re.sub(r"\s+", " ", r.out)
        assert r.returncode == 1, r.out
        assert f"{w.stack.base}/nothere does not look like a gpucloud API: check endpoint" in text, r.out
    finally:
        d.cleanup()


def test_12_destroy_leaves_nothing(w):
    r = w.ws.ok("destroy", "-auto-approve", "-no-color")
    assert "Destroy complete! Resources: 15 destroyed." in r.out, r.out[-3000:]
    api, pid = w.t.api, w.t.project["id"]
    for collection in ("vpcs", "subnets", "security-groups", "ssh-keys", "ib-partitions", "public-ips"):
        assert api.all(collection, project=pid) == [], collection
    assert _live(api, "instances") == [] and _live(api, "clusters") == []
    assert _live(api, "leases") == []
    poll(lambda: _open_allocations(w) == [], timeout=60, what="no open allocation of the project")
    assert [p["slug"] for p in w.t.owner.all("projects")] == ["training"]
    assert w.t.owner.all("webhooks") == []


def test_13_volume_apply_plan_import_drift_resize_plans_destroy(w):
    """gpucloud_volume end to end on the stack's storage (the libvirt storage driver on the hosts' test driver,
    tests/e2e/stack.py): apply, empty plan, import, empty plan, drift, a grow applied in place (the extend action),
    a shrink planned as a replacement, destroy. gpucloud_volume_attachment's id is checked at plan and import
    time here; test_14 attaches it to an instance."""
    vtype = w.setup.ops.post("volume-types", {
        "name": "tf-ssd", "pool": "gpucloud-tf-ssd", "pool_kind": "dir",
        "pool_target_path": "/var/lib/libvirt/images/gpucloud-tf-ssd"}, expect=201).json()
    w.vtype = vtype
    api, pid = w.t.api, w.t.project["id"]
    ws = Workspace(w.env, "volume")

    def config(size=2, description="datasets", extra=""):
        return HEADER + f"""
resource "gpucloud_volume" "data" {{
  name        = "data"
  volume_type = "{vtype['id']}"
  size_gib    = {size}
  description = "{description}"
}}
""" + extra

    try:
        ws.write(config())
        ws.ok("init", "-no-color")
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 1 added, 0 changed, 0 destroyed." in r.out, r.out[-3000:]
        vol = ws.managed()["gpucloud_volume.data"]
        got = api.get(f"volumes/{vol['id']}").json()
        assert (got["status"], got["size_gib"], got["project"], vol["status"]) == ("available", 2, pid, "available")
        assert ws.run("plan", "-detailed-exitcode", "-no-color").returncode == 0

        ws.ok("state", "rm", "gpucloud_volume.data")
        ws.write(f'import {{\n  to = gpucloud_volume.data\n  id = "{vol["id"]}"\n}}\n', "imports.tf")
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 1 imported, 0 added, 0 changed, 0 destroyed." in r.out, r.out[-3000:]
        ws.remove("imports.tf")
        r = ws.run("plan", "-detailed-exitcode", "-no-color")
        assert r.returncode == 0, r.out[-3000:]

        # drift: renamed behind Terraform's back -> renamed back in place
        api.patch(f"volumes/{vol['id']}", {"name": "renamed"})
        r = ws.run("plan", "-detailed-exitcode", "-no-color")
        assert r.returncode == 2 and "1 to change, 0 to destroy" in r.out, r.out[-3000:]
        ws.ok("apply", "-auto-approve", "-no-color")
        assert api.get(f"volumes/{vol['id']}").json()["name"] == "data"

        ws.write(config(size=3))
        r = ws.ok("apply", "-auto-approve", "-no-color")
        text = re.sub(r"\s+", " ", r.out)
        assert "updated in-place" in text and "size_gib = 2 -> 3" in text, text
        assert "Resources: 0 added, 1 changed, 0 destroyed." in text, text
        got = api.get(f"volumes/{vol['id']}").json()
        assert (got["size_gib"], got["status"]) == (3, "available"), got
        assert ws.managed()["gpucloud_volume.data"]["id"] == vol["id"]
        assert ws.run("plan", "-detailed-exitcode", "-no-color").returncode == 0
        ws.write(config(size=1))
        text = re.sub(r"\s+", " ", ws.run("plan", "-no-color").out)
        assert "must be replaced" in text and "# forces replacement" in text, text

        ws.write(config(extra=f"""
resource "gpucloud_volume_attachment" "a" {{
  volume_id   = gpucloud_volume.data.id
  instance_id = "{uuid.uuid4()}"
}}
"""))
        text = re.sub(r"\s+", " ", ws.run("plan", "-no-color").out)
        assert "gpucloud_volume_attachment.a will be created" in text and 'id = (known after apply)' in text, text
        r = ws.run("import", "-no-color", "gpucloud_volume_attachment.a", "not-an-id")
        assert r.returncode == 1 and "The id is `<volume_id>/<instance_id>`." in r.out, r.out[-3000:]
        r = ws.run("import", "-no-color", "gpucloud_volume_attachment.a", f"{vol['id']}/{uuid.uuid4()}")
        assert r.returncode == 1 and "is not attached to instance" in r.out, r.out[-3000:]

        ws.write(config(size=3))
        r = ws.ok("destroy", "-auto-approve", "-no-color")
        assert "Destroy complete! Resources: 1 destroyed." in r.out, r.out[-3000:]
        assert _live(api, "volumes", project=pid) == []
    finally:
        ws.cleanup()


def test_14_volume_attachment_to_a_vm_apply_import_drift_destroy(w):
    """gpucloud_volume_attachment on a running 1-GPU VM: attached, an empty second plan, `terraform import` by
    `<volume>/<instance>` then an empty plan, a detach through the API re-created by the next apply, the
    attachment removed from the configuration (the volume stays, available), destroy (nothing left)."""
    api, pid = w.t.api, w.t.project["id"]
    ws = Workspace(w.env, "attach")

    def config(attached=True):
        return HEADER + f"""
resource "gpucloud_instance" "vm" {{
  name   = "attach-vm"
  flavor = "{w.setup.flavor_1x['id']}"
  image  = "{w.setup.image['id']}"
}}
resource "gpucloud_volume" "data" {{
  name        = "attach-data"
  volume_type = "{w.vtype['id']}"
  size_gib    = 1
}}
""" + ("""
resource "gpucloud_volume_attachment" "a" {
  volume_id   = gpucloud_volume.data.id
  instance_id = gpucloud_instance.vm.id
}
""" if attached else "")

    def attachments(vid):
        return [(a["instance"], a["status"]) for a in api.get(f"volumes/{vid}").json()["attachments"]]

    try:
        ws.write(config())
        ws.ok("init", "-no-color")
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 3 added, 0 changed, 0 destroyed." in r.out, r.out[-3000:]
        state = ws.managed()
        vid, iid = state["gpucloud_volume.data"]["id"], state["gpucloud_instance.vm"]["id"]
        att = state["gpucloud_volume_attachment.a"]
        assert (att["id"], att["status"], att["device"]) == (f"{vid}/{iid}", "attached", "vdb"), att
        assert attachments(vid) == [(iid, "attached")]
        assert api.get(f"volumes/{vid}").json()["status"] == "in-use"
        r = ws.run("plan", "-detailed-exitcode", "-no-color")
        assert r.returncode == 0, r.out[-3000:]

        ws.ok("state", "rm", "gpucloud_volume_attachment.a")
        r = ws.ok("import", "-no-color", "gpucloud_volume_attachment.a", f"{vid}/{iid}")
        assert "Import successful!" in r.out, r.out[-3000:]
        r = ws.run("plan", "-detailed-exitcode", "-no-color")
        assert r.returncode == 0, r.out[-3000:]

        # Detached behind Terraform's back: the next plan attaches it again.
        api.post(f"volumes/{vid}/detach", {"instance": iid}, expect=202)
        poll(lambda: attachments(vid) == [], timeout=60, what="the volume detached")
        r = ws.run("plan", "-detailed-exitcode", "-no-color")
        assert r.returncode == 2 and "gpucloud_volume_attachment.a will be created" in r.out, r.out[-3000:]
        assert "1 to add, 0 to change, 0 to destroy" in r.out, r.out[-3000:]
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 1 added, 0 changed, 0 destroyed." in r.out, r.out[-3000:]
        assert attachments(vid) == [(iid, "attached")]

        # The attachment leaves the configuration: detached, the volume stays (available).
        ws.write(config(attached=False))
        r = ws.ok("apply", "-auto-approve", "-no-color")
        assert "Resources: 0 added, 0 changed, 1 destroyed." in r.out, r.out[-3000:]
        got = api.get(f"volumes/{vid}").json()
        assert (got["status"], got["attachments"]) == ("available", []), got

        ws.write(config())
        ws.ok("apply", "-auto-approve", "-no-color")
        assert attachments(vid) == [(iid, "attached")]
        r = ws.ok("destroy", "-auto-approve", "-no-color")
        assert "Destroy complete! Resources: 3 destroyed." in r.out, r.out[-3000:]
        assert _live(api, "volumes", project=pid) == [] and _live(api, "instances") == []
        poll(lambda: _open_allocations(w) == [], timeout=60, what="no open allocation of the project")
    finally:
        ws.cleanup()
