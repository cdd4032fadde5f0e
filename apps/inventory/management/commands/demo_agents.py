"""`manage.py demo_agents --url http://127.0.0.1:8000`: node agents for the demo fleet (started by `make run`).

Every *demo* host (libvirt URI ``test:///...``; any other host is never touched) gets the real agent's control-plane
client and command executor (`agent/gpucloud_agent`) on its fake driver (HGX H100 or H200 per the host's GPUs):

* hosts whose GPUs are in MIG mode and whose catalog model hands MIG instances to VMs on SR-IOV VFs
  (``vgpu_backing: sriov_vf``, Hopper and later) enroll at start, reporting ``--vfs-per-gpu`` VFs per GPU (what
  ``sriov-manage -e ALL`` exposes), so the MIG flavors can place and prepare a VF before any agent command;
* any other demo host enrolls the first time the control plane queues a command for it.

Enrollment spends a one-time token (`enrollment_token_create`, as an operator does with
``POST /api/v1/hosts/{id}/enrollment-token``) over ``POST /api/v1/agent/enroll``; the reported inventory is the host
as the inventory records it (the fake driver's own identifiers follow DGX naming, which the sample fleet does not
use), with its recorded MIG layout loaded into the fake driver so the two agree after a restart. Then, every
``--interval`` seconds, each enrolled host with queued commands pulls them (``GET /api/v1/agent/commands``),
executes them and reports (``POST .../result``), as `gpucloud-agent run` does; and every ``--heartbeat-interval``
seconds (15, the real agent's interval) each enrolled host heartbeats (``POST /api/v1/agent/heartbeat``), so the
control plane's `heartbeat_lost` watch (docs/health.md) sees the demo hosts alive. Runs until interrupted.
"""
from __future__ import annotations

import time

from django.core.management.base import BaseCommand

DEMO_URI_PREFIX = "test:///"


class DemoAgent:
    """One demo host's agent: the real client and executor over a fake driver."""

    def __init__(self, base_url: str, host, vfs_per_gpu: int):
        from gpucloud_agent.backends.fake import FakeBackend
        from gpucloud_agent.client import ControlPlane
        from gpucloud_agent.executor import Executor

        from apps.inventory.catalog import gpu_model_get

        gpus = list(host.gpus.order_by("index").prefetch_related("gpu_instances"))
        kind = "hgx-h200" if gpus and gpus[0].model.startswith("H200") else "hgx-h100"
        backend = FakeBackend(kind)
        self.inventory = {"host": {}, "nvswitch": {"active_partitions": list(host.active_partitions or [])},
                          "gpus": []}
        backend.state["active_partitions"] = list(host.active_partitions or [])
        for g in gpus:
            mig = g.mode == "mig"
            spec = gpu_model_get(g.model)
            vfs = vfs_per_gpu if mig and spec is not None and spec.vgpu_backing == "sriov_vf" else 0
            layout = [{"profile_id": gi.profile_id, "start": gi.start, "size": gi.size, "gi_id": gi.gi_id or n + 1}
                      for n, gi in enumerate(g.gpu_instances.all())]
            backend.state["mig"][str(g.index)] = mig
            backend.state["gis"][str(g.index)] = [dict(x) for x in layout]
            backend.state["next_gi"] = max([backend.state["next_gi"], *[x["gi_id"] + 1 for x in layout]])
            base = g.pci_address[:7]
            self.inventory["gpus"].append({
                "index": g.index, "uuid": g.uuid, "serial": g.serial, "model": g.model,
                "pci_address": g.pci_address, "numa_node": g.numa_node,
                "mig": {"enabled": mig, "layout": [{k: x[k] for k in ("profile_id", "start", "size")}
                                                   for x in layout]},
                "vfs": [{"index": v, "pci_address": f"{base}:{(v + 4) // 8:02x}.{(v + 4) % 8}"} for v in range(vfs)]})
        self.host_id, self.name = host.pk, host.name
        self.cp, self.executor = ControlPlane(base_url), Executor(backend)

    def enroll(self) -> None:
        from apps.inventory.models import Host
        from apps.inventory.services.agent import enrollment_token_create

        _, token = enrollment_token_create(actor=None, host=Host.objects.get(pk=self.host_id), ttl_s=300)
        self.cp.enroll(token, self.inventory, "demo-fake")

    def heartbeat(self) -> None:
        from gpucloud_agent import __version__

        self.cp.heartbeat(__version__)

    def work(self) -> int:
        done = 0
        for command in self.cp.commands():
            outcome = self.executor.execute(command)
            self.cp.report(command["id"], outcome["succeeded"], outcome["result"], outcome["error"])
            done += 1
        return done


class Command(BaseCommand):
    help = "Run fake node agents for the demo fleet's hosts (test:/// libvirt URI) against the local API."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="the API's base URL")
        parser.add_argument("--interval", type=float, default=0.3, help="seconds between command polls")
        parser.add_argument("--heartbeat-interval", type=float, default=15.0,
                            help="seconds between an enrolled host's heartbeats (the real agent's default)")
        parser.add_argument("--vfs-per-gpu", type=int, default=4, help="SR-IOV VFs a MIG GPU reports")
        parser.add_argument("--once", action="store_true", help="one pass, then exit (tests)")

    def handle(self, *args, url, interval, heartbeat_interval, vfs_per_gpu, once, **options):
        from django.db import close_old_connections

        from apps.inventory.models import Host

        agents: dict = {}

        def agent_for(host) -> DemoAgent | None:
            if host.pk not in agents:
                agent = DemoAgent(url, host, vfs_per_gpu)
                try:
                    agent.enroll()
                except Exception as exc:  # noqa: BLE001 - keep serving the other hosts; retried next pass
                    self.stderr.write(f"{host.name}: enrollment failed: {exc}")
                    return None
                agents[host.pk] = agent
                self.stdout.write(f"agent enrolled on {host.name}")
            return agents[host.pk]

        demo = Host.objects.filter(libvirt_uri__startswith=DEMO_URI_PREFIX)
        from apps.inventory.catalog import gpu_model_get

        for host in demo.filter(gpus__mode="mig").distinct().order_by("name"):
            model = host.gpus.values_list("model", flat=True).first()
            spec = gpu_model_get(model) if model else None
            if spec is not None and spec.vgpu_backing == "sriov_vf":
                agent_for(host)
        self.stdout.write(f"demo agents: {len(agents)} MIG hosts enrolled; following commands of {demo.count()} "
                          f"demo hosts")
        self.stdout.flush()
        last_beat = 0.0
        while True:
            close_old_connections()
            if time.monotonic() - last_beat >= heartbeat_interval:
                last_beat = time.monotonic()
                for agent in list(agents.values()):
                    try:
                        agent.heartbeat()
                    except Exception as exc:  # noqa: BLE001 - like the real agent: a missed heartbeat, go on
                        self.stderr.write(f"{agent.name}: heartbeat failed: {exc}")
            busy = demo.filter(agent_commands__status="queued").distinct()
            for host in busy:
                agent = agent_for(host)
                if agent is None:
                    continue
                try:
                    agent.work()
                except Exception as exc:  # noqa: BLE001 - like the real agent: log and keep going
                    self.stderr.write(f"{host.name}: {exc}")
            if once:
                return
            time.sleep(interval)
