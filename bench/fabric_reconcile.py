"""Fabric reconcile benchmark: OVN (1,000 VPCs, 5,000 ports) and OpenSM on ibsim (2,000 GUIDs, 128 partitions).

Usage:  .venv/bin/python bench/fabric_reconcile.py [--vpcs 1000] [--ports-per-vpc 5] [--guids 2000]
                                                   [--partitions 128] [--reuse]

Builds a benchmark-only database (`gpucloud_bench_net`, dropped and re-created unless --reuse; env
BENCH_DATABASE_NAME / BENCH_PG), fills it with bulk inserts (not timed), then times:

- ovn_seconds: `ovn_reconcile()` into an empty OVN northbound DB (NB + SB + ovn-northd on unix sockets in a
  temporary directory): the desired state read from PostgreSQL and written through ovsdbapp in batched
  transactions. Reported beside it: the transactions/commands it took, the second run (0 transactions; the driver
  skips the diff when nothing changed), a third run after ovn-northd wrote to NB (a full diff; 0 transactions)
  and the time ovn-northd needed to compile the result (`ovn-nbctl --wait=sb sync`, not in ovn_seconds).
- ib_seconds: `ib_fabric_reconcile()` on an ibsim fabric generated from inventory (33 leaves x 62 HCAs under 2
  spines; OpenSM already up with an empty partitions file): render partitions.conf for 2,000 GUIDs in 128
  partitions, validate it with OpenSM's parser on a throw-away ibsim, install it atomically, SIGHUP, and poll
  one member port until OpenSM has programmed it. Afterwards (not timed) 128 ports are read with smpquery and
  compared with what the partitions require.

Targets: ovn_seconds < 30, ib_seconds < 5. The last stdout line is JSON with ovn_seconds and
ib_seconds (plus details).
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get("BENCH_DATABASE_NAME", "gpucloud_bench_net")
PG = os.environ.get("BENCH_PG", "postgres://127.0.0.1:5432")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
os.environ["DATABASE_URL"] = f"{PG}/{BENCH_DB}"


def setup_django(reuse: bool) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if exists and not reuse:
            conn.execute(f'DROP DATABASE "{BENCH_DB}" WITH (FORCE)')
        if not exists or not reuse:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _projects(n: int, prefix: str):
    from apps.tenancy.models import Organization, Project

    org, _ = Organization.objects.get_or_create(slug=f"bench-{prefix}", defaults={"name": "bench", "plan": "enterprise"})
    existing = {p.slug: p for p in Project.objects.filter(organization=org)}
    new = [Project(organization=org, slug=f"{prefix}-{i}", name=f"{prefix} {i}") for i in range(n)
           if f"{prefix}-{i}" not in existing]
    Project.objects.bulk_create(new)
    return list(Project.objects.filter(organization=org).order_by("slug"))


def build_vpcs(n_vpcs: int, ports_per_vpc: int) -> None:
    """n VPCs (10 per project, all 10.0.0.0/16 with subnet 10.0.1.0/24), a default group with its two rules and
    an ssh rule, and `ports_per_vpc` ports each. Bulk inserts (the services are not what is measured)."""
    from apps.networking.models import IpAllocation, Port, SecurityGroup, SecurityGroupRule, Subnet, Vpc

    projects = _projects((n_vpcs + 9) // 10, "net")
    vpcs = [Vpc(project=projects[i // 10], name=f"vpc-{i % 10}", cidr="10.0.0.0/16") for i in range(n_vpcs)]
    Vpc.objects.bulk_create(vpcs, batch_size=1000)
    subnets = [Subnet(project=v.project, vpc=v, name="sn", cidr="10.0.1.0/24", ip_version=4, gateway_ip="10.0.1.1",
                      dhcp_start="10.0.1.2", dhcp_end="10.0.1.254") for v in vpcs]
    Subnet.objects.bulk_create(subnets, batch_size=1000)
    groups = [SecurityGroup(project=v.project, vpc=v, name="default", is_default=True) for v in vpcs]
    SecurityGroup.objects.bulk_create(groups, batch_size=1000)
    rules = []
    for g in groups:
        rules += [SecurityGroupRule(project=g.project, security_group=g, direction="egress"),
                  SecurityGroupRule(project=g.project, security_group=g, direction="ingress", remote_group=g),
                  SecurityGroupRule(project=g.project, security_group=g, direction="ingress", protocol="tcp",
                                    port_range_min=22, port_range_max=22, remote_ip_prefix="0.0.0.0/0")]
    SecurityGroupRule.objects.bulk_create(rules, batch_size=2000)
    ports, allocs, links = [], [], []
    rng = random.Random(7)
    for v, s, g in zip(vpcs, subnets, groups, strict=True):
        for k in range(ports_per_vpc):
            p = Port(project=v.project, vpc=v, subnet=s, mac_address="0a:58:" + ":".join(
                f"{rng.getrandbits(8):02x}" for _ in range(4)), instance_id=uuid.uuid4())
            ports.append(p)
            allocs.append(IpAllocation(project=v.project, port=p, subnet=s,
                                       address=str(ipaddress.ip_address("10.0.1.2") + k)))
            links.append(Port.security_groups.through(port=p, securitygroup=g))
    Port.objects.bulk_create(ports, batch_size=2000)
    IpAllocation.objects.bulk_create(allocs, batch_size=2000)
    Port.security_groups.through.objects.bulk_create(links, batch_size=2000)


def bench_ovn(n_vpcs: int, ports_per_vpc: int) -> dict:
    from apps.networking.drivers.ovn import OvnDriver
    from apps.networking.services.reconcile import ovn_reconcile
    from tests.networking.fabrics import OvnCluster

    build_vpcs(n_vpcs, ports_per_vpc)
    cluster = OvnCluster().start()
    driver = OvnDriver(cluster.nb, timeout=600)
    try:
        _ = driver.api  # connect (schema download) outside the timed part
        t0 = time.perf_counter()
        first = ovn_reconcile(driver=driver)
        ovn_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        second = ovn_reconcile(driver=driver)
        second_seconds = time.perf_counter() - t1
        t2 = time.perf_counter()
        cluster.sync()
        northd_seconds = time.perf_counter() - t2
        t3 = time.perf_counter()
        third = ovn_reconcile(driver=driver)      # northd wrote to NB since: a full diff that finds nothing
        full_diff_seconds = time.perf_counter() - t3
        counts = {t: len(cluster.nbctl("--bare", "--columns=_uuid", "list", t).split())
                  for t in ("Logical_Router", "Logical_Switch", "Logical_Switch_Port", "Port_Group", "ACL")}
    finally:
        driver.close()
        cluster.stop()
    print(f"OVN: {n_vpcs} VPCs, {n_vpcs * ports_per_vpc} ports in {ovn_seconds:.2f} s "
          f"({first['transactions']} transactions, {first['commands']} commands); second run "
          f"{second['transactions']} transactions in {second_seconds:.2f} s; full no-op diff {third['transactions']} "
          f"transactions in {full_diff_seconds:.2f} s; northd compile {northd_seconds:.2f} s; "
          f"NB rows {counts}")
    return {"ovn_seconds": round(ovn_seconds, 3), "ovn_first": first, "ovn_second": second,
            "ovn_second_seconds": round(second_seconds, 3), "ovn_northd_sync_seconds": round(northd_seconds, 3),
            "ovn_full_noop_diff_seconds": round(full_diff_seconds, 3), "ovn_full_noop_diff_transactions":
                third["transactions"],
            "ovn_rows": counts}


def build_ib(n_guids: int, n_partitions: int):
    """An InfiniBand fabric of leaves (62 HCAs each) under two spines, one host per HCA port, and
    `n_partitions` partitions (one per project) sharing the GUIDs round-robin."""
    from apps.inventory.models import Fabric, HcaPort, Host, Region, Switch, SwitchLink, Zone
    from apps.networking.models import IbPartition, IbPartitionMember, PkeyPool

    region, _ = Region.objects.get_or_create(name="bench")
    zone, _ = Zone.objects.get_or_create(name="bench-a", region=region)
    fabric = Fabric.objects.create(name=f"ib-bench-{uuid.uuid4().hex[:6]}", kind="infiniband", region=region)
    PkeyPool.objects.create(fabric=fabric, first_pkey=0x0100, last_pkey=0x7FFE)
    leaves_n = (n_guids + 61) // 62
    spines = [Switch(name=f"{fabric.name}-spine-{s}", fabric=fabric, role="spine", port_count=64) for s in range(2)]
    leaves = [Switch(name=f"{fabric.name}-leaf-{i}", fabric=fabric, role="leaf", port_count=64)
              for i in range(leaves_n)]
    Switch.objects.bulk_create(spines + leaves)
    SwitchLink.objects.bulk_create([SwitchLink(a_switch=leaf, a_port=64 - s, b_switch=spine, b_port=i + 1)
                                    for i, leaf in enumerate(leaves) for s, spine in enumerate(spines)])
    hosts = [Host(name=f"{fabric.name}-h{i}", zone=zone, serial=f"{fabric.name}-{i}") for i in range(n_guids)]
    Host.objects.bulk_create(hosts, batch_size=1000)
    base = 0x0C42A10300000000 | (random.Random(3).getrandbits(20) << 20)
    ports = [HcaPort(host=h, device="mlx5_0", port_guid=f"0x{base + 2 * i + 1:016x}", fabric=fabric,
                     leaf_switch=leaves[i // 62], leaf_port=i % 62 + 1) for i, h in enumerate(hosts)]
    HcaPort.objects.bulk_create(ports, batch_size=1000)
    projects = _projects(n_partitions, f"ib-{fabric.name}")
    parts = [IbPartition(project=p, fabric=fabric, name="train", pkey=0x0100 + i, ipoib=True)
             for i, p in enumerate(projects[:n_partitions])]
    IbPartition.objects.bulk_create(parts)
    members = [IbPartitionMember(project=parts[i % n_partitions].project, partition=parts[i % n_partitions],
                                 guid=port.port_guid, membership="full", hca_port=port) for i, port in enumerate(ports)]
    IbPartitionMember.objects.bulk_create(members, batch_size=2000)
    return fabric, parts


def bench_ib(n_guids: int, n_partitions: int) -> dict:
    from apps.networking import desired
    from apps.networking.drivers.ibsim import SimFabric
    from apps.networking.drivers.opensm import OpenSmDriver, render_partitions
    from apps.networking.services.reconcile import ib_fabric_reconcile

    fabric, parts = build_ib(n_guids, n_partitions)
    sim = SimFabric(desired.ibsim_topology(fabric)).start()
    try:
        t_up = time.perf_counter()
        sim.start_opensm(render_partitions([]), timeout=120)
        subnet_up = time.perf_counter() - t_up
        env = {"LD_PRELOAD": sim.env["LD_PRELOAD"], "IBSIM_SOCKNAME": sim.sockname}
        driver = OpenSmDriver(partitions_path=str(sim.partitions_path), pid_file=str(sim.pid_file), env=env)
        specs = desired.ib_partitions(fabric)
        probe_part = specs[-1]
        probe = probe_part.members[-1].guid
        want = {0x7FFF, 0x8000 | probe_part.pkey}

        t0 = time.perf_counter()
        result = ib_fabric_reconcile(fabric_id=fabric.pk, driver=driver, verify=False)
        t_written = time.perf_counter() - t0
        while set(driver.read_pkeys(probe)) != want:
            if time.perf_counter() - t0 > 60:
                raise RuntimeError("OpenSM did not apply the partitions within 60 s")
            time.sleep(0.01)
        ib_seconds = time.perf_counter() - t0

        rng = random.Random(11)
        sample = rng.sample([m.guid for p in specs for m in p.members], 128)
        expected = desired.expected_pkey_tables(specs, sample)
        t1 = time.perf_counter()
        wrong = driver.wait_applied(expected, timeout=15)
        verify_seconds = time.perf_counter() - t1
        second = ib_fabric_reconcile(fabric_id=fabric.pk, driver=driver, verify=False)
        size = sim.partitions_path.stat().st_size
    finally:
        sim.cleanup()
    print(f"IB: {n_guids} GUIDs in {n_partitions} partitions applied in {ib_seconds:.2f} s (render+validate+write+HUP "
          f"{t_written:.2f} s; file {size} bytes); OpenSM first SUBNET UP {subnet_up:.2f} s; smpquery check of 128 "
          f"ports: {len(wrong)} wrong ({verify_seconds:.2f} s); second reconcile writes={second['writes']}")
    return {"ib_seconds": round(ib_seconds, 3), "ib_write_seconds": round(t_written, 3), "ib_writes": result["writes"],
            "ib_sample_ports": 128, "ib_sample_wrong": len(wrong), "ib_second_writes": second["writes"],
            "ib_subnet_up_seconds": round(subnet_up, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vpcs", type=int, default=1000)
    parser.add_argument("--ports-per-vpc", type=int, default=5)
    parser.add_argument("--guids", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=128)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    setup_django(args.reuse)
    out = {}
    out.update(bench_ovn(args.vpcs, args.ports_per_vpc))
    out.update(bench_ib(args.guids, args.partitions))
    out["targets"] = {"ovn_seconds": 30, "ib_seconds": 5}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
