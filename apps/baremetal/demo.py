"""Demo bare metal for `manage.py demo_load` (idempotent): two whole HGX H100 hosts (apps/baremetal/fleets/demo.yaml,
imported after the sample fleet), each enrolled as a `fake-hardware` node into the Ironic `make run` starts in the
background, and the public bare-metal flavor `bm-h100-8x` (a whole host: its 8 H100s, 224 CPU threads, 2 TiB;
billing's demo prices it). The load runs before Ironic answers: each enroll operation waits for it (its first step
retried with backoff), and the host stays `enrolling`, out of placement, until its node is `available`. A load
finding a host's node adds nothing for it (whatever state the node is in: staff recover a held one). Hosts are
enrolled only where the run starts Ironic (`BAREMETAL_DEMO_ENROLL`, set by scripts/run.sh unless IRONIC=0);
otherwise they are imported and stay `enrolling`, and a create of the flavor answers 503 `baremetal_unavailable`."""
from __future__ import annotations

from pathlib import Path

from . import conf

FLEET = Path(__file__).resolve().parent / "fleets" / "demo.yaml"
FLAVOR = {"name": "bm-h100-8x", "kind": "baremetal", "vcpus": 224, "memory_mib": 2097152, "disk_gib": 3500,
          "gpu_form": "gpu", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
          "description": "A whole HGX H100 server (bare metal, deployed by Ironic): 8 H100 SXM5, 224 threads, 2 TiB"}
DRIVER = "fake-hardware"


def load_demo(stdout) -> None:
    from apps.compute.models import Flavor
    from apps.compute.services.catalog import flavor_create
    from apps.inventory.fleet.sync import fleet_apply, fleet_plan
    from apps.inventory.models import Host

    from .services.nodes import node_enroll

    plan = fleet_plan(FLEET.read_text())
    if not plan.ok:
        raise RuntimeError("demo bare-metal fleet invalid: " + "; ".join(map(str, plan.errors)))
    if plan.changes:
        fleet_apply(plan)
    flavor_created = not Flavor.objects.filter(name=FLAVOR["name"]).exists()
    if flavor_created:  # through compute's service (audited; compute owns the catalog)
        flavor_create(actor=None, **FLAVOR)
    names = sorted(key[0] for key in plan.desired["host"])
    enrolled = []
    pending = Host.objects.filter(name__in=names, baremetal_node__isnull=True).order_by("name")
    for host in pending if conf.demo_enroll() else ():
        node_enroll(actor=None, host=host, driver=DRIVER, service_starting=True)
        enrolled.append(host.name)
    into = f"{', '.join(enrolled) or 'none'} enrolling into Ironic, {DRIVER}" if conf.demo_enroll() else \
        "not enrolled: no Ironic in this run"
    stdout.write(f"baremetal: {len(names)} demo hosts ({into}); flavor {FLAVOR['name']} {'created' if flavor_created else 'present'}\n")
