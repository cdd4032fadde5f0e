"""The tenant's journey end to end, through the public HTTP API only, on the real stack started by
`tests/e2e/stack.py`: a staff operator imports the sample fleet and publishes flavors and prices; a new
organization's owner onboards, builds networks and launches a 2-node 8-GPU cluster and a MIG VM; a second tenant
with the same CIDR is isolated; a lease is reserved; a node fails and recovers; the month is invoiced; everything
is deleted and nothing is left behind.

Run alone with `pytest -m e2e` (about 5 minutes on 2 cores). Each step is one test function; they run in file order
and share the journey's state (`J`); when a step fails, the later ones are skipped. A step that the product cannot
do yet is an `xfail` naming exactly what is missing, and the journey goes on without it.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from types import SimpleNamespace

import pytest

from .stack import ROOT, Api, Stack, poll

pytestmark = pytest.mark.e2e

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc test@example"
SSH_KEY_FP = "SHA256:gDaWWthFRjg5/UIKbaq6OCohUpxgfs8xDhsxYWcGAGM"  # ssh-keygen -lf (OpenSSH 9.2)
H100 = "H100-SXM5-80GB"
MIG_HOST = "a-su2-n32"   # the operator enabled MIG mode on this host's GPUs
CIDR, SUBNET_CIDR = "10.10.0.0/16", "10.10.1.0/24"
ACTIVE_TIMEOUT = 240
# List prices per hour (USD) for the two SLA tiers that ship with billing (standard 99.0 %, premium 99.9 %), keyed
# like billing's demo book (apps/billing/demo.py): per flavor on demand, per GPU reserved (leases), public IPs.
PRICES = {
    ("flavor:name=h100-8x", "on_demand"): {"standard": "19.92", "premium": "23.90"},
    ("flavor:name=h100-mig-3g40", "on_demand"): {"standard": "0.99", "premium": "1.19"},
    (f"gpu:model={H100}", "reserved"): {"standard": "1.79", "premium": "2.15"},
    ("public_ip", "on_demand"): {"standard": "0.005", "premium": "0.006"},
}

J = SimpleNamespace()


@pytest.fixture(scope="module")
def stack(request):
    s = Stack().start()
    J.stack = s
    J.ops, J.billing = Api(s.base, s.ops_token), Api(s.base, s.billing_token)
    try:
        yield s
    finally:
        stop = getattr(J, "agent_follower", None)
        if stop is not None:
            stop.set()
        s.stop(keep_logs=bool(request.module.__dict__.get("_FAILED_STEPS")))


@pytest.fixture
def j(request, stack):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return J


def _wait_status(api: Api, path: str, status: str, timeout: float = ACTIVE_TIMEOUT) -> dict:
    def check():
        body = api.get(path).json()
        assert body["status"] != "error", f"{path} went to error: {body}"
        return body if body["status"] == status else None

    return poll(check, timeout=timeout, interval=0.5, what=f"{path} to be {status}")


def _onboard(j, slug: str, owner_email: str, *, tier: str) -> SimpleNamespace:
    """Staff create the organization; its owner accepts the e-mailed invitation, logs in to the console, mints an
    organization token, creates a project and a read-write project token."""
    org = j.ops.post("organizations", {
        "slug": slug, "name": slug.title(), "legal_name": f"{slug.title()} Inc.", "billing_email": f"ap@{slug}.example",
        "currency": "USD", "billing_timezone": "UTC", "plan": "enterprise", "default_sla_tier": tier,
        "owner_email": owner_email}, expect=201).json()
    anonymous = Api(j.stack.base)
    invite = j.stack.invitation_token(owner_email)
    anonymous.post("invitations/accept", {"token": invite, "password": "correct horse battery staple",
                                          "full_name": f"{slug} owner"}, expect=(200, 201))
    console = Api(j.stack.base)
    csrf = console.get("session").json()["csrf_token"]
    console.s.headers["X-CSRFToken"] = csrf
    console.post("session", {"email": owner_email, "password": "correct horse battery staple"}, expect=200)
    console.s.headers["X-CSRFToken"] = console.s.cookies.get("csrftoken", csrf)
    org_token = console.post("tokens", {"name": "owner", "scope": "write", "organization": org["id"]},
                             expect=201).json()["token"]
    owner = Api(j.stack.base, org_token)
    project = owner.post("projects", {"organization": org["id"], "slug": "training", "name": "Training"},
                         expect=201).json()
    project_token = owner.post("tokens", {"name": "terraform", "scope": "write", "project": project["id"]},
                               expect=201).json()["token"]
    return SimpleNamespace(org=org, owner=owner, project=project, api=Api(j.stack.base, project_token))


def _lsps(j) -> set[str]:
    return set(j.stack.ovn.nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port").split())


# ---- 1 ------------------------------------------------------------------------------------------------------
def test_1_staff_import_fleet_and_publish_flavors_and_prices(j):
    sample = (ROOT / "apps/inventory/fleets/sample.yaml").read_text()
    plan = j.ops.post("fleet/import", {"document": sample, "dry_run": True}, expect=200).json()
    assert plan["changes"], plan
    j.ops.post("fleet/import", {"document": sample, "dry_run": False}, expect=(200, 201))
    hosts = j.ops.all("hosts", zone="eu-west-a", gpu_model=H100)
    assert len(hosts) == 64 and {h["state"] for h in hosts} == {"available"}
    j.stack.start_infiniband()   # the subnet manager now runs on the fabric the inventory describes
    j.ops.post("pkey-pools", {"fabric": "ib-compute", "first_pkey": "0x0100", "last_pkey": "0x01ff"},
               expect=(200, 201))
    j.ops.post("public-ip-pools", {"name": "public", "cidr": "203.0.113.0/24", "first_ip": "203.0.113.10",
                                   "last_ip": "203.0.113.250", "gateway_ip": "203.0.113.1",
                                   "network_name": "physnet-public"}, expect=201)
    j.flavor_8x = j.ops.post("flavors", {
        "name": "h100-8x", "vcpus": 208, "memory_mib": 1835008, "disk_gib": 4000, "gpu_form": "gpu",
        "gpu_model": H100, "gpu_count": 8, "hugepages": True}, expect=201).json()
    j.flavor_mig = j.ops.post("flavors", {
        "name": "h100-mig-3g40", "vcpus": 8, "memory_mib": 65536, "disk_gib": 100, "gpu_form": "mig",
        "gpu_model": H100, "mig_profile": "3g.40gb"}, expect=201).json()
    j.image = j.ops.post("images", {
        "name": "ubuntu-24-04", "os": "ubuntu", "os_version": "24.04",
        "source_url": "https://cloud-images.ubuntu.com/releases/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img",
        "checksum": "sha256:" + "ab" * 32}, expect=201).json()
    # A flavor's MIG profile must exist for its GPU model (the catalog): a typo is refused, nothing written.
    bad = j.ops.post("flavors", {"name": "bad", "vcpus": 1, "memory_mib": 1024, "gpu_form": "mig",
                                 "gpu_model": H100, "mig_profile": "3g.41gb"}, expect=400).json()
    assert bad["code"] == "invalid_flavor"
    # Prices: the billing admin publishes one book with both SLA tiers (operators cannot write prices).
    tiers = {t["code"] for t in j.billing.all("sla-tiers")}
    assert {"standard", "premium"} <= tiers
    book_body = {"name": "list prices", "currency": "USD", "effective_from": "2026-01-01T00:00:00Z"}
    j.ops.post("price-books", book_body, expect=403)
    book = j.billing.post("price-books", book_body, expect=201).json()
    for (sku, model), by_tier in PRICES.items():
        for tier, price in by_tier.items():
            j.billing.post(f"price-books/{book['id']}/prices", {
                "sku": sku, "sla_tier": tier, "pricing_model": model, "unit": "hour", "unit_price": price,
                "billing_increment_seconds": 1, "minimum_seconds": 0 if model == "reserved" else 60},
                expect=(200, 201))
    prices = j.billing.all("prices", book=book["id"])
    assert len(prices) == 8, prices
    j.book = book


# ---- 2 ------------------------------------------------------------------------------------------------------
def test_2_organization_owner_member_project_token(j):
    a = _onboard(j, "acme", "cto@acme.example", tier="premium")
    j.a = a
    # The owner invites a member, who accepts with a new account and can then read the project.
    a.owner.post("invitations", {"organization": a.org["id"], "email": "dev@acme.example", "role": "member"},
                 expect=201)
    Api(j.stack.base).post("invitations/accept", {"token": j.stack.invitation_token("dev@acme.example"),
                                                   "password": "another long passphrase"}, expect=(200, 201))
    members = {m["user_email"]: m["role"] for m in a.owner.all("memberships", organization=a.org["id"])}
    assert members == {"cto@acme.example": "owner", "dev@acme.example": "member"}, members
    me = a.api.get("me").json()
    assert me["email"] == "cto@acme.example", me
    assert [p["id"] for p in a.api.all("projects")] == [a.project["id"]]


# ---- 3 ------------------------------------------------------------------------------------------------------
def test_3_tenant_networks_partition_and_ssh_key(j):
    a = j.a
    pid = a.project["id"]
    vpc = a.api.post("vpcs", {"project": pid, "name": "main", "cidr": CIDR}, expect=201).json()
    subnet = a.api.post("subnets", {"vpc": vpc["id"], "name": "nodes", "cidr": SUBNET_CIDR}, expect=201).json()
    assert subnet["gateway_ip"] == "10.10.1.1"
    sg = a.api.post("security-groups", {"vpc": vpc["id"], "name": "ssh"}, expect=201).json()
    a.api.post("security-group-rules", {"security_group": sg["id"], "direction": "ingress", "protocol": "tcp",
                                        "port_range_min": 22, "port_range_max": 22,
                                        "remote_ip_prefix": "0.0.0.0/0"}, expect=201)
    part = a.api.post("ib-partitions", {"project": pid, "fabric": "ib-compute", "name": "train"}, expect=201).json()
    assert 0x0100 <= part["pkey"] <= 0x01FF, part
    key = a.api.post("ssh-keys", {"project": pid, "name": "laptop", "public_key": SSH_KEY}, expect=201).json()
    assert key["fingerprint"] == SSH_KEY_FP
    a.vpc, a.subnet, a.sg, a.partition, a.key = vpc, subnet, sg, part, key
    # The partition reaches OpenSM (partitions.conf rendered, checked, written and SIGHUPed by the reconcile).
    pkey_hex = f"{part['pkey']:#06x}"
    poll(lambda: pkey_hex in j.stack.sim.partitions_path.read_text(), timeout=90,
         what=f"P_Key {pkey_hex} in OpenSM's partitions.conf")


# ---- 4 ------------------------------------------------------------------------------------------------------
def test_4_cluster_and_mig_vm_active_public_ip(j):
    a, ops = j.a, j.ops
    # Operator side: MIG mode enabled on one host (its agent reports it); agents answer every host's commands.
    j.stack.agents.start(ops, MIG_HOST, mig=True)
    poll(lambda: {g["mode"] for g in ops.all("gpus", host=MIG_HOST)} == {"mig"}, timeout=60,
         what=f"{MIG_HOST}'s GPUs reported in MIG mode")
    j.agent_follower = j.stack.agents.follow_commands(ops)

    pid = a.project["id"]
    cluster = a.api.post("clusters", {"project": pid, "name": "train", "flavor": j.flavor_8x["id"],
                                      "image": j.image["id"], "size": 2, "ssh_keys": [a.key["id"]],
                                      "subnet_id": a.subnet["id"], "security_group_ids": [a.sg["id"]],
                                      "ib_partition_id": a.partition["id"]},
                         expect=(201, 202)).json()
    cluster = cluster.get("cluster", cluster)
    vm = a.api.post("instances", {"project": pid, "name": "notebook", "flavor": j.flavor_mig["id"],
                                  "image": j.image["id"], "ssh_keys": [a.key["id"]]},
                    headers={"Idempotency-Key": "notebook-1"}, expect=202).json()["instance"]
    members = poll(lambda: a.api.get(f"clusters/{cluster['id']}").json()["members"], timeout=30,
                   what="cluster members")
    assert len(members) == 2
    for m in members:
        inst = _wait_status(a.api, f"instances/{m}", "active")
        assert inst["observed_state"] == "running", inst
    _wait_status(a.api, f"instances/{vm['id']}", "active")
    cluster = _wait_status(a.api, f"clusters/{cluster['id']}", "active", timeout=30)
    a.cluster, a.members, a.vm = cluster, members, vm

    # Placement (staff view): one host per member, all under one leaf per rail.
    hosts = {h["id"]: h["name"] for h in ops.all("hosts", zone="eu-west-a")}
    member_hosts = []
    for m in members:
        allocs = [x for x in ops.all("allocations", consumer=m) if x["end"] is None]
        assert sum(x["resource_class"] == "gpu" for x in allocs) == 8, allocs
        member_hosts.append(hosts[allocs[0]["host"]])
    assert len(set(member_hosts)) == 2, member_hosts
    leaves: dict[int, set] = {}
    for h in member_hosts:
        for p in ops.all("hca-ports", host=h, fabric="ib-compute"):
            leaves.setdefault(p["rail"], set()).add(p["leaf_switch"])
    assert len(leaves) == 8 and all(len(v) == 1 for v in leaves.values()), leaves
    a.member_hosts = member_hosts
    mig_allocs = [x for x in ops.all("allocations", consumer=vm["id"]) if x["end"] is None]
    assert any(x["resource_class"] == "mig" for x in mig_allocs), mig_allocs
    assert {hosts[x["host"]] for x in mig_allocs} == {MIG_HOST}
    gis = [gi for g in ops.all("gpus", host=MIG_HOST) for gi in g.get("gpu_instances", [])]
    assert [gi["profile"] for gi in gis] == ["3g.40gb"], gis

    # Each member's NIC is a port in the tenant subnet with the SSH group; a public IP is NATed to the one with
    # the subnet's first address (tenant B's first port gets the same address in step 5).
    member_ports = [p for m in members for p in a.api.all("ports", instance=m)]
    assert len(member_ports) == 2 and all(p["security_groups"] == [a.sg["id"]] for p in member_ports), member_ports
    port = min(member_ports, key=lambda p: tuple(int(x) for x in p["fixed_ips"][0]["ip_address"].split(".")))
    fip = a.api.post("public-ips", {"vpc": a.vpc["id"], "pool": "public", "port": port["id"]}, expect=201).json()
    assert fip["address"].startswith("203.0.113.")
    a.port, a.fip = port, fip
    lsp = f"gpc-p-{port['id'].replace('-', '')}"
    poll(lambda: lsp in _lsps(j), timeout=90, what=f"OVN logical switch port {lsp}")
    ports_in_switch = j.stack.ovn.nbctl("--bare", "--columns=ports", "find", "Logical_Switch",
                                        f"name=gpc-s-{a.subnet['id']}")
    lsp_uuid = j.stack.ovn.nbctl("--bare", "--columns=_uuid", "find", "Logical_Switch_Port", f"name={lsp}").strip()
    assert lsp_uuid in ports_in_switch.split()
    poll(lambda: fip["address"] in j.stack.ovn.nbctl("lr-nat-list", f"gpc-r-{a.vpc['id']}"), timeout=90,
         what=f"dnat_and_snat {fip['address']} on the VPC router")
    nat = j.stack.ovn.nbctl("lr-nat-list", f"gpc-r-{a.vpc['id']}")
    assert re.search(rf"dnat_and_snat\s+{re.escape(fip['address'])}\s+10\.10\.1\.", nat), nat


def test_4b_instances_join_tenant_networks(j):
    """The cluster members' NICs in the tenant subnet and their HCA GUIDs in the tenant's P_Key."""
    a = j.a
    ports = [p for m in a.members for p in a.api.all("ports", instance=m)]
    members = a.api.get(f"ib-partitions/{a.partition['id']}").json()["members"]
    assert len(ports) == 2 and {p["subnet"] for p in ports} == {a.subnet["id"]}, ports
    guids = {p["port_guid"] for h in a.member_hosts for p in j.ops.all("hca-ports", host=h, fabric="ib-compute")}
    assert len(guids) == 16 and guids <= {m["guid"] for m in members}, members
    for m in a.members:
        inst = a.api.get(f"instances/{m}").json()
        assert [p["id"] for p in inst["ports"]] == [p["id"] for p in ports if p["instance_id"] == m], inst
        assert [x["id"] for x in inst["ib_partitions"]] == [a.partition["id"]], inst
    pkey = a.partition["pkey"]

    def full_member(guid: str) -> str:
        out = subprocess.run(["smpquery", "-G", "pkeys", guid], env=j.stack.sim.env, capture_output=True,
                             text=True, timeout=30).stdout
        return out if f"{0x8000 | pkey:#06x}" in out else ""

    for guid in sorted(guids)[:2]:   # the reconcile after the join reached OpenSM
        poll(lambda guid=guid: full_member(guid), timeout=90, what=f"P_Key {0x8000 | pkey:#06x} on {guid}")


# ---- 5 ------------------------------------------------------------------------------------------------------
def test_5_second_tenant_same_cidr_is_isolated(j):
    a = j.a
    b = _onboard(j, "globex", "ceo@globex.example", tier="standard")
    j.b = b
    vpc = b.api.post("vpcs", {"project": b.project["id"], "name": "main", "cidr": CIDR}, expect=201).json()
    subnet = b.api.post("subnets", {"vpc": vpc["id"], "name": "nodes", "cidr": SUBNET_CIDR}, expect=201).json()
    port_b = b.api.post("ports", {"subnet": subnet["id"]}, expect=201).json()
    # A second NIC of tenant A (default group) as the positive control: A -> A on SSH is delivered.
    port_a2 = a.api.post("ports", {"subnet": a.subnet["id"], "name": "train-1-eth0"}, expect=201).json()
    ip = {p["id"]: p["fixed_ips"][0]["ip_address"] for p in (a.port, port_a2, port_b)}
    assert ip[port_b["id"]] in (ip[a.port["id"]], ip[port_a2["id"]]), "same CIDR, same first addresses"
    lsp = {p["id"]: f"gpc-p-{p['id'].replace('-', '')}" for p in (a.port, port_a2, port_b)}
    poll(lambda: set(lsp.values()) <= _lsps(j), timeout=90, what="OVN ports of both tenants")
    j.stack.ovn.sync()

    def trace(switch: str, src: dict, dst: dict) -> str:
        flow = (f'inport == "{lsp[src["id"]]}" && eth.src == {src["mac_address"]} && eth.dst == {dst["mac_address"]}'
                f' && ip4.src == {ip[src["id"]]} && ip4.dst == {ip[dst["id"]]} && ip.ttl == 64 && tcp && tcp.dst == 22')
        return j.stack.ovn.trace(switch, flow)

    ok = trace(f"gpc-s-{a.subnet['id']}", port_a2, a.port)
    assert f'output("{lsp[a.port["id"]]}")' in ok, ok
    blocked = trace(f"gpc-s-{subnet['id']}", port_b, a.port)
    assert lsp[a.port["id"]] not in blocked, blocked

    # Nothing of tenant A is visible to tenant B: every object is a 404 and absent from lists.
    a_objects = {"vpcs": a.vpc["id"], "subnets": a.subnet["id"], "security-groups": a.sg["id"],
                 "ports": a.port["id"], "public-ips": a.fip["id"], "ib-partitions": a.partition["id"],
                 "ssh-keys": a.key["id"], "instances": a.vm["id"], "clusters": a.cluster["id"],
                 "projects": a.project["id"], "organizations": a.org["id"]}
    for collection, oid in a_objects.items():
        for api in (b.api, b.owner):
            assert api.get(f"{collection}/{oid}", expect=404).json()["status"] == 404
            assert oid not in {x["id"] for x in api.all(collection)}, collection
    b.api.delete(f"instances/{a.members[0]}", expect=404)
    b.api.post(f"instances/{a.vm['id']}/stop", expect=404)
    b.api.req("PATCH", f"public-ips/{a.fip['id']}", 404, json={"port": port_b["id"]})
    assert a.api.get(f"instances/{a.vm['id']}").json()["status"] == "active"


# ---- 6 ------------------------------------------------------------------------------------------------------
def test_6_private_cloud_lease_next_week_in_capacity_calendar(j):
    a = j.a
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today + dt.timedelta(days=7 - today.weekday())      # next Monday 00:00 UTC
    end = start + dt.timedelta(days=7)
    lease = a.api.post("leases", {
        "project": a.project["id"], "name": "private-cloud", "start": start.isoformat(), "end": end.isoformat(),
        "kind": "hosts", "gpu_model": H100, "count": 4, "zone": "eu-west-a", "max_leaves_per_rail": 1},
        expect=201).json()
    assert lease["status"] == "confirmed", lease
    a.lease = lease
    window = {"start": (start - dt.timedelta(days=1)).isoformat(), "end": (start + dt.timedelta(days=1)).isoformat(),
              "step_s": 86400, "gpu_model": H100, "zone": "eu-west-a"}
    before, during = a.api.get("capacity", params=window).json()
    assert before["free_gpus"] - during["free_gpus"] == 32, (before, during)
    staff = j.ops.get("capacity", params=window).json()
    assert staff[1]["leased_gpus"] == 32 and staff[0]["leased_gpus"] == 0, staff
    assert "leased_gpus" not in during   # tenants see free capacity only
    assert lease["id"] in {x["id"] for x in a.api.all("leases")}
    j.b.api.get(f"leases/{lease['id']}", expect=404)


# ---- 7 ------------------------------------------------------------------------------------------------------
INCIDENT_S = 20   # the node's outage, whole seconds


def _ts(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _wait_until(instant: dt.datetime, what: str) -> None:
    """Wait (bounded) until the wall clock has passed `instant`: the service refuses effective times in the future
    and meters closed periods only."""
    timeout = max(0.0, (instant - dt.datetime.now(dt.UTC)).total_seconds()) + 15
    poll(lambda: dt.datetime.now(dt.UTC) > instant, timeout=timeout, interval=0.5, what=what)


def test_7_node_incident_and_invoice_with_sla_credit(j):
    """A cluster node is down INCIDENT_S seconds while the instances run; the month's draft invoice bills every
    instance from its launch to the last closed metering period (60 s in the e2e stack, BILLING_METERING_PERIOD_SECONDS)
    except the node's downtime, and its SLA report shows the uptime below the premium target with a credit, pending
    for the next invoice (docs/billing.md §5: a credit is added to the invoice after the finalized one it is for)."""
    a, ops, billing = j.a, j.ops, j.billing
    step = int(j.stack.env["BILLING_METERING_PERIOD_SECONDS"])
    down_member, up_member = a.members   # member_hosts[i] is the host of members[i] (step 4)
    instances = {i: a.api.get(f"instances/{i}").json() for i in (*a.members, a.vm["id"])}
    launched = {i: _ts(inst["launched_at"]) for i, inst in instances.items()}
    host = ops.all("hosts", name=a.member_hosts[0])[0]

    # The incident: explicit whole-second times while every instance runs, after the host's last condition change.
    not_before = max([*launched.values(), *([_ts(host["state_changed_at"])] if host["state_changed_at"] else [])])
    fault_at = not_before.replace(microsecond=0) + dt.timedelta(seconds=2)
    recovered_at = fault_at + dt.timedelta(seconds=INCIDENT_S)
    _wait_until(fault_at, f"the fault time {fault_at.isoformat()}")
    ops.post(f"hosts/{host['id']}/mark-faulty", {"reason": "e2e: GPU fell off the bus", "at": fault_at.isoformat()},
             expect=200)
    incident = poll(lambda: ops.all("incidents", host=host["name"], open="true"), timeout=10, what="open incident")[0]
    assert incident["provider_at_fault"] is True and _ts(incident["start"]) == fault_at, incident
    # A faulty host takes no new work: the placement dry run counts it under the host_state filter.
    dry = ops.post("placement/candidates", {"project": a.project["id"], "gpus_per_host": 8, "hosts": 1,
                                            "vcpus": 8, "memory_mib": 65536, "gpu_models": [H100]},
                   expect=200).json()
    removed = {f["filter"]: f for f in dry["explanation"]["filters"]}
    assert removed["host_state"]["reasons"].get("faulty") == 1, dry["explanation"]
    assert host["id"] not in {h.get("host_id", h.get("host")) for c in dry["candidates"] for h in c.get("hosts", [])}
    # Recovery at an explicit time too; an effective time in the future is refused, nothing written.
    future = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    bad = ops.post(f"hosts/{host['id']}/mark-available", {"reason": "e2e", "at": future.isoformat()},
                   expect=400).json()
    assert bad["code"] == "invalid_time", bad
    _wait_until(recovered_at, f"the recovery time {recovered_at.isoformat()}")
    ops.post(f"hosts/{host['id']}/mark-available", {"reason": "e2e: replaced the riser",
                                                    "at": recovered_at.isoformat()}, expect=200)
    closed = ops.get(f"incidents/{incident['id']}").json()
    assert _ts(closed["end"]) == recovered_at and closed["duration_s"] == INCIDENT_S, closed

    # Usage is recorded over closed metering periods only: wait until the incident's period has closed and the
    # node has run long enough that its billed time stays above the per-start minimum (60 s) without the outage.
    need = max(recovered_at, max(launched.values()) + dt.timedelta(seconds=INCIDENT_S + 60 + 5))
    boundary = dt.datetime.fromtimestamp(-(-need.timestamp() // step) * step, dt.UTC)
    _wait_until(boundary + dt.timedelta(seconds=1), f"the metering period ending {boundary.isoformat()} to close")

    period = fault_at.strftime("%Y-%m")
    requested = billing.post("invoice-runs", {"period": period, "finalize": False}, expect=202).json()
    assert requested["status"] in ("pending", "running", "completed"), requested  # a worker runs it

    def finished():
        body = billing.get(f"invoice-runs/{requested['id']}").json()
        assert body["status"] != "failed", body
        return body if body["status"] == "completed" else None

    run = poll(finished, timeout=ACTIVE_TIMEOUT, interval=0.5, what="the invoice run to complete")
    assert run["held_invoices"] == [], run   # every SKU has a price
    invoices = billing.all("invoices", organization=a.org["id"], period=period)
    assert len(invoices) == 1, invoices
    invoice = invoices[0]
    assert invoice["status"] == "draft" and Decimal(str(invoice["unpriced_seconds"])) == 0, invoice

    # What the run rated: the usage records it had when it finished (a later beat collection may add more).
    finished = _ts(run["finished_at"])
    usage = [u for u in billing.all("usage", organization=a.org["id"], period=period)
             if _ts(u["recorded_at"]) <= finished]
    lines = {(ln["resource_id"], ln["sku"]): ln for ln in invoice["lines"] if ln["kind"] == "usage"}
    flavors = {a.members[0]: j.flavor_8x, a.members[1]: j.flavor_8x, a.vm["id"]: j.flavor_mig}
    billed = {}
    for inst_id, flavor in flavors.items():
        sku = f"flavor:name={flavor['name']}"
        records = sorted((u for u in usage if u["resource_id"] == inst_id), key=lambda u: u["start"])
        assert records and {(u["source"], u["sku"], u["sla_tier"]) for u in records} == {
            ("compute.instance", sku, "premium")}, records
        # From the launch, contiguous, cut at metering-period boundaries, up to the last closed one.
        assert _ts(records[0]["start"]) == launched[inst_id], (records[0], launched[inst_id])
        assert all(r["end"] == n["start"] for r, n in zip(records, records[1:], strict=False)), records
        assert all(_ts(r["end"]).timestamp() % step == 0 for r in records), records
        assert _ts(records[-1]["end"]) >= boundary, records[-1]
        ran = sum(u["seconds"] for u in records)
        line = lines.get((inst_id, sku))
        assert line is not None, (inst_id, sku, invoice["lines"])
        # Per second (increment 1 s, rounded up per run); the node's outage is not charged.
        expected = math.ceil(ran - 1e-6) - (INCIDENT_S if inst_id == down_member else 0)
        assert Decimal(line["billed_seconds"]) == expected, (inst_id, ran, line)
        price = Decimal(PRICES[(sku, "on_demand")]["premium"])
        assert Decimal(line["unit_price"]) == price, line
        assert Decimal(line["amount"]) == (expected * price / 3600).quantize(Decimal("0.01"), ROUND_HALF_UP), line
        billed[inst_id] = line
    assert any(ln["sku"] == "public_ip" for ln in lines.values()), invoice["lines"]   # the public IP held since step 4
    assert not [ln for ln in invoice["lines"] if ln["kind"] == "sla_credit"], invoice["lines"]

    # The SLA report (the tenant's own view): the node's month uptime is below the premium target and earns the
    # credit of the tier's schedule; it is pending (applied to the next invoice once this one is finalized).
    tier = {t["code"]: t for t in billing.all("sla-tiers")}["premium"]
    reports = a.owner.all("sla-reports", period=period)
    assert [r["resource_id"] for r in reports] == [down_member], reports   # the others had no downtime
    report = reports[0]
    held, down = Decimal(report["held_minutes"]), Decimal(report["downtime_minutes"])
    assert down == math.ceil(INCIDENT_S / 60), report   # every started minute of downtime counts
    uptime = Decimal(report["uptime_pct"])
    assert abs(uptime - 100 * (held - down) / held) < Decimal("0.01"), report   # held is shown to 4 places
    assert uptime < Decimal(report["target_uptime_pct"]) == Decimal(tier["target_uptime_pct"]), report
    pct = min((s for s in tier["credit_schedule"] if uptime < Decimal(str(s["below"]))),
              key=lambda s: Decimal(str(s["below"])))["credit_pct"]
    assert Decimal(report["credit_pct"]) == Decimal(str(pct)) > 0, (report, tier)
    assert Decimal(report["billed_amount"]) == Decimal(billed[down_member]["amount"]), report
    assert Decimal(report["credit_amount"]) == (Decimal(report["billed_amount"]) * Decimal(str(pct)) / 100).quantize(
        Decimal("0.01"), ROUND_HALF_UP) > 0, report
    assert report["source_invoice"] == invoice["id"] and report["applied_invoice"] is None, report
    j.b.owner.get(f"sla-reports/{report['id']}", expect=404)   # another tenant's report is a 404


# ---- 8 ------------------------------------------------------------------------------------------------------
def test_8_delete_everything_nothing_remains(j):
    a, ops = j.a, j.ops
    a.api.patch(f"public-ips/{a.fip['id']}", {"port": None})
    a.api.delete(f"public-ips/{a.fip['id']}")
    for p in a.api.all("ports"):
        a.api.delete(f"ports/{p['id']}")
    a.api.delete(f"clusters/{a.cluster['id']}", expect=(200, 202, 204))
    a.api.delete(f"instances/{a.vm['id']}")
    a.api.post(f"leases/{a.lease['id']}/cancel", expect=(200, 202))
    for m in [*a.members, a.vm["id"]]:
        inst = _wait_status(a.api, f"instances/{m}", "deleted", timeout=180)
        assert inst["observed_state"] == "missing", inst   # the domain is gone from libvirt
    _wait_status(a.api, f"clusters/{a.cluster['id']}", "deleted", timeout=30)
    a.api.delete(f"ib-partitions/{a.partition['id']}")
    a.api.delete(f"security-groups/{a.sg['id']}")
    a.api.delete(f"subnets/{a.subnet['id']}")
    a.api.delete(f"vpcs/{a.vpc['id']}")

    open_allocs = [x for x in ops.all("allocations", project=a.project["id"]) if x["end"] is None]
    assert open_allocs == [], open_allocs
    leased = [x for x in ops.all("allocations", project=a.project["id"])
              if x["consumer_type"] == "lease" and x["end"] and x["end"] > x["start"]]
    assert all(dt.datetime.fromisoformat(x["end"].replace("Z", "+00:00")) <= dt.datetime.now(dt.UTC)
               for x in leased), leased
    assert a.api.all("ports") == [] and a.api.all("ib-partitions") == [] and a.api.all("vpcs") == []
    pkey_hex = f"{a.partition['pkey']:#06x}"
    poll(lambda: pkey_hex not in j.stack.sim.partitions_path.read_text(), timeout=90,
         what=f"P_Key {pkey_hex} gone from OpenSM's partitions.conf")
    gone = {f"gpc-p-{a.port['id'].replace('-', '')}", f"gpc-s-{a.subnet['id']}", f"gpc-r-{a.vpc['id']}"}

    def ovn_names() -> set[str]:
        return {name for table in ("Logical_Switch_Port", "Logical_Switch", "Logical_Router")
                for name in j.stack.ovn.nbctl("--bare", "--columns=name", "find", table).split()}

    poll(lambda: not (gone & ovn_names()), timeout=90, what="tenant A's OVN router, switch and port removed")
    gis = [gi for g in ops.all("gpus", host=MIG_HOST) for gi in g.get("gpu_instances", [])]
    assert gis == [], gis
