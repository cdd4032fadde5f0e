"""`manage.py demo_agents --url http://127.0.0.1:8000`: node agents for the demo fleet (started by `make run`).

Every *demo* host (libvirt URI ``test:///...``; any other host is never touched) gets the real agent's control-plane
client, command executor and health reporting (`agent/gpucloud_agent`) on its fake driver (HGX H100 or H200 per the
host's GPUs), and every one of them enrolls at start, so each heartbeats like a host with a running agent:

* hosts whose GPUs hand vGPUs to VMs on SR-IOV VFs (catalog ``vgpu_backing: sriov_vf``: Hopper and later, Ada)
  enroll first, reporting their VFs as the real agent reads them from sysfs (``{index, pci_address}`` per VF,
  once ``sriov-manage -e ALL`` created them): a GPU in MIG mode ``--vfs-per-gpu`` VFs, one in vGPU mode
  (L40S) every VF the catalog says the GPU has (``sriov_vfs``). So the MIG and vGPU flavors can place from the
  start; the vGPU type is chosen per VF when an instance's devices are prepared (its ``devices.vfs`` entry);
* then every other demo host (whole-GPU hosts).

Enrollment spends a one-time token (`enrollment_token_create`, as an operator does with
``POST /api/v1/hosts/{id}/enrollment-token``) over ``POST /api/v1/agent/enroll``; the reported inventory is the host
as the inventory records it (the fake driver's own identifiers follow DGX naming, which the sample fleet does not
use), with its recorded MIG layout loaded into the fake driver so the two agree after a restart. Once all are
enrolled the command touches ``--ready-file`` (`make run` starts Celery beat after it, so the `heartbeat_lost`
watch never judges hosts by an earlier run's last heartbeat). Then, every ``--interval`` seconds, each host with
queued commands pulls them (``GET /api/v1/agent/commands``), executes them and reports (``POST .../result``), as
`gpucloud-agent run` does; and every ``--heartbeat-interval`` seconds (15, the real agent's interval) each enrolled
host heartbeats (``POST /api/v1/agent/heartbeat``), so the control plane's `heartbeat_lost` watch (docs/health.md)
sees the demo hosts alive.

One demo host has a faulty GPU (``--fault HOST:GPU:XID``, default `DEMO_FAULT`; an empty value for none): right
after enrolling, its agent reports that XID on that GPU through ``POST /api/v1/agent/health-events``, as the real
agent reports a driver's XID, and health applies the classification's effects (XID 79, the GPU fell off the bus:
the GPU faulty with an incident, the host cordoned, a reboot pending). The fake's key for the signal is the same on
every start, so the control plane records it once per database: after an operator returned the GPU and host to
service, a restart does not break them again. Runs until interrupted.
"""
from __future__ import annotations

import time

from django.core.management.base import BaseCommand
from django.db.models import Q

#: libvirt's test driver, in process (`test:///default`) or hosted by a libvirtd every process shares
#: (`test+unix:///default?socket=...`, docs/deployment.md): the hypervisors of the demo hosts
DEMO_URI_PREFIXES = ("test:///", "test+unix://")


#: the demo host whose agent reports a GPU fault at start: host, GPU index, XID (79: the GPU fell off the bus)
DEMO_FAULT = "a-su1-n03:5:79"


def demo_vf_count(gpu, spec, vfs_per_gpu: int) -> int:
    """SR-IOV VFs the demo agent reports for `gpu` (catalog `spec`): none unless the model hands vGPUs to VMs on
    VFs; a MIG GPU `vfs_per_gpu`, a GPU in vGPU mode every VF the model has (``sriov-manage -e ALL``)."""
    if spec is None or spec.vgpu_backing != "sriov_vf":
        return 0
    if gpu.mode == "mig":
        return vfs_per_gpu
    return spec.sriov_vfs if gpu.mode == "vgpu" else 0


def _fault(value: str) -> tuple[str, int, int] | None:
    if not value:
        return None
    host, gpu, xid = value.rsplit(":", 2)
    return host, int(gpu), int(xid)


class DemoAgent:
    """One demo host's agent: the real client, executor and health reporting over a fake driver."""

    def __init__(self, base_url: str, host, vfs_per_gpu: int):
        from gpucloud_agent.agent import Agent
        from gpucloud_agent.backends.fake import FakeBackend
        from gpucloud_agent.client import ControlPlane

        from apps.inventory.catalog import gpu_model_get

        gpus = list(host.gpus.order_by("index").prefetch_related("gpu_instances"))
        kind = "hgx-h200" if gpus and gpus[0].model.startswith("H200") else "hgx-h100"
        self.backend = backend = FakeBackend(kind, host_id=host.name)   # one fake identity (and dedup keys) per host
        self.inventory = {"host": {}, "nvswitch": {"active_partitions": list(host.active_partitions or [])},
                          "gpus": []}
        backend.state["active_partitions"] = list(host.active_partitions or [])
        self.vf_gpus = 0
        for g in gpus:
            vfs = demo_vf_count(g, gpu_model_get(g.model), vfs_per_gpu)
            self.vf_gpus += vfs > 0
            mig = g.mode == "mig"
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
        backend.state["vfs"] = [v["pci_address"] for g in self.inventory["gpus"] for v in g["vfs"]]  # reset_vf's
        # the HCA ports as the fleet file cabled them, each with its `max_vfs` SR-IOV VFs (functions 1.. of its PF)
        self.inventory["hca_ports"] = [
            {"device": p.device, "port_number": p.port_number, "port_guid": p.port_guid, "lid": p.lid,
             "rate_gbps": p.rate_gbps, "state": "ACTIVE", "pci_address": p.pci_address,
             "vfs": [{"index": v, "pci_address": f"{p.pci_address[:7]}:{(v + 1) // 8:02x}.{(v + 1) % 8}"}
                     for v in range(p.max_vfs if p.pci_address else 0)]}
            for p in host.hca_ports.order_by("device", "port_number")]
        backend.state["hca_vfs"] = [f"{p['device']}/{v['index']}" for p in self.inventory["hca_ports"]
                                    for v in p["vfs"]]  # set_hca_vf_guid's
        self.host_id, self.name = host.pk, host.name
        self.cp = ControlPlane(base_url)
        self.agent = Agent(backend, self.cp)
        self.executor = self.agent.executor

    def enroll(self) -> None:
        from apps.inventory.models import Host
        from apps.inventory.services.agent import enrollment_token_create

        _, token = enrollment_token_create(actor=None, host=Host.objects.get(pk=self.host_id), ttl_s=300)
        self.cp.enroll(token, self.inventory, "demo-fake")

    def heartbeat(self) -> None:
        from gpucloud_agent import __version__

        self.cp.heartbeat(__version__)

    def fault(self, gpu_index: int, xid: int) -> int:
        """The driver raises `xid` on GPU `gpu_index`; the agent reports it (`Agent.report_health`). Returns how many
        signals the control plane answered."""
        self.backend.inject("xid", xid=xid, gpu=gpu_index, message=f"Xid {xid} (demo: injected on GPU {gpu_index})")
        return self.agent.report_health()

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
        parser.add_argument("--fault", default=DEMO_FAULT,
                            help="HOST:GPU:XID the host's agent reports at start ('' for none)")
        parser.add_argument("--ready-file", default="", help="touched once every demo host enrolled")
        parser.add_argument("--once", action="store_true", help="one pass, then exit (tests)")

    def handle(self, *args, url, interval, heartbeat_interval, vfs_per_gpu, fault, ready_file, once, **options):
        from pathlib import Path

        from django.db import close_old_connections

        from apps.inventory.models import Host

        agents: dict = {}
        fault = _fault(fault)

        def agent_for(host) -> DemoAgent | None:
            if host.pk not in agents:
                agent = DemoAgent(url, host, vfs_per_gpu)
                try:
                    agent.enroll()
                except Exception as exc:  # noqa: BLE001 - keep serving the other hosts; retried next pass
                    self.stderr.write(f"{host.name}: enrollment failed: {exc}")
                    return None
                agents[host.pk] = agent
                self.stdout.write(f"agent enrolled on {host.name}" + (f" ({agent.vf_gpus} GPUs with SR-IOV VFs)"
                                                                     if agent.vf_gpus else ""))
                if fault is not None and fault[0] == host.name:
                    try:
                        agent.fault(fault[1], fault[2])
                        self.stdout.write(f"{host.name}: agent reported XID {fault[2]} on GPU {fault[1]}")
                    except Exception as exc:  # noqa: BLE001 - the demo runs on without its faulty GPU
                        self.stderr.write(f"{host.name}: fault report failed: {exc}")
            return agents[host.pk]

        demo = Host.objects.filter(Q(libvirt_uri__startswith=DEMO_URI_PREFIXES[0])
                                   | Q(libvirt_uri__startswith=DEMO_URI_PREFIXES[1]))

        def enroll_all() -> None:
            # hosts whose VFs the MIG and vGPU flavors need first, then the rest
            hosts = list(demo.exclude(state="retired").prefetch_related("gpus").order_by("name"))
            hosts.sort(key=lambda h: not any(g.mode in ("mig", "vgpu") for g in h.gpus.all()))
            for host in hosts:
                agent_for(host)

        enroll_all()
        vf_hosts = sum(1 for a in agents.values() if a.vf_gpus)
        self.stdout.write(f"demo agents: {len(agents)} of {demo.count()} demo hosts enrolled ({vf_hosts} with "
                          f"SR-IOV VFs)")
        self.stdout.flush()
        if ready_file:
            Path(ready_file).touch()
        last_beat = 0.0
        while True:
            close_old_connections()
            if time.monotonic() - last_beat >= heartbeat_interval:
                last_beat = time.monotonic()
                if len(agents) < demo.exclude(state="retired").count():
                    enroll_all()   # a host whose enrollment failed, or one imported since
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
