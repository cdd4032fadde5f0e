"""Fault replay: a simulated fleet (default 2,048 hosts x 8 H100 = 16,384 GPUs) for 54 simulated days at the
failure rates and root causes Meta reported for the Llama 3 405B run (419 unexpected interruptions on 16,384 GPUs
in 54 days), with on-demand VMs on 70 % of the GPUs, through the product's real code paths on PostgreSQL.

Usage:
  .venv/bin/python bench/fault_replay.py [--hosts 2048] [--days 54] [--scale 1.0] [--rate 1.0] [--seed 1]
                                         [--log var/fault_replay.jsonl]

`--scale` multiplies the fleet (hosts), `--rate` the failure rate (a small fleet with `--rate 50` still sees
faults); the fault counts per root cause are the published counts x hosts/2048 x days/54 x rate, rounded by
largest remainder, placed at uniformly random instants on uniformly random hosts/GPUs (`--seed`).

It uses its own database (`gpucloud_bench_fault_replay` on 127.0.0.1, dropped and re-created each run; override
with BENCH_DATABASE_URL) and an in-memory Celery broker (no worker: the replay runs each operation's steps
itself, with the real runner, at the simulated instant they are due). The compute driver is the in-memory
`FakeDriver`.

What runs (all product code, in this process, time from `apps.core.clock` moved with time_machine, never slept):

- fleet: hosts (8 GPUs, no NVSwitch partitioning), an agent credential each, one organization (enterprise plan),
  a BMC each (`FenceDevice`, ADR 0218), an 8-GPU whole-host VM flavor priced at $36.00/h on both SLA tiers; 70 % of the hosts get one VM each through
  `instance_create` and the `instance.create` operation (half on the `standard` tier, half on `premium`).
- faults: each root cause is mapped to the signal the node agent (or the control plane) reports for it (`CAUSES`
  below). A GPU/NIC signal is reported by the agent at its next 15 s cycle (`agent.run_forever`'s interval)
  through `health_event_ingest` (the agent API's service); a host that dies (PSU, CPU, memory, SSD, chassis,
  unplanned host maintenance) stops heartbeating and the `heartbeat_lost` beat (its period in apps/health/schedule.py) reports it once the
  last heartbeat is older than `HEALTH_HEARTBEAT_LOST_SECONDS`; silent data corruption and software faults send
  no device signal (nothing for the product to see).
- while anything is due the clock advances on a 15 s grid: the agents' cycle (queued agent commands answered,
  e.g. the scrub of a released GPU), `remediations_advance` (beat, 15 s), `heartbeat_lost_detect` (beat, its
  schedule's period), `fences_advance` (beat, 15 s: every host has a BMC, driven by the `fake` fencing driver,
  which powers off when asked and reads back off), the batched last-seen flush (`AGENT_LAST_SEEN_FLUSH_SECONDS`) and every runnable operation step; the checkpoint notice is the project's
  (default `HEALTH_NOTICE_SECONDS_DEFAULT`, 900 s). Time jumps to the next fault only when no remediation,
  operation or agent command is open and no silent host is waiting for its heartbeat-lost event (then every
  periodic task would do nothing).
- billing at the end: the clock moves to the 2nd of each month after the replay, `usage_record_collect`,
  `downtime_sync` and `invoice_run_execute` for every month touched; the SLA reports (`SlaReport`, what the
  invoice's `sla_credit` lines carry) are compared with `credits_from_log`, which reads only the JSON-lines log
  this replay wrote and the tier schedule and price the replay itself configured (no billing code).

Figures: `detect_to_drain_p99_s` (event `observed_at`, the instant the signal existed for the product, to the
instant the GPU/host stopped taking placements, simulated s), `fault_to_drain_p99_s` (from the physical fault),
`recovered_pct` (affected on-demand VMs active on a healthy host at the end with no human step / affected),
`credit_mismatches` (VM-months whose credit or downtime minutes differ), `wall_s` (the replay, seeding excluded:
`setup_s`). The last stdout line is that JSON object.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = "postgres://127.0.0.1:5432/gpucloud_bench_fault_replay"
UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, tzinfo=UTC)
TICK = 15  # s: the agent's cycle and the remediation beat
HOURLY_PRICE = Decimal("36.00")  # the 8-GPU VM, both tiers: $0.01 per second
# the tiers as the replay knows them (the same numbers migration 0002 ships; the replay checks they still are)
TIERS = {
    "standard": [("99.0", "10"), ("95.0", "30"), ("90.0", "100")],
    "premium": [("99.9", "10"), ("99.0", "25"), ("95.0", "100")],
}

# Llama 3 405B pre-training, 54 days on 16,384 H100: root cause -> (count, signal, detail). Signal kinds:
# "gpu" (an agent event on one GPU), "nic" (an agent event on the host), "host_down" (the agent goes silent),
# "none" (no signal the product can see).
CAUSES = {
    "faulty_gpu_incl_nvlink": (148, "gpu", [("xid", 79), ("xid", 74), ("nvlink_down", None)]),
    "gpu_hbm3": (72, "gpu", [("xid", 48), ("ecc_dbe", None), ("row_remap_failure", None)]),
    "software_bug": (54, "none", []),
    "network_switch_cable": (35, "nic", [("ib_port_down", None)]),
    "host_maintenance": (32, "host_down", []),
    "gpu_sram": (19, "gpu", [("xid", 95)]),
    "gpu_system_processor": (17, "gpu", [("xid", 119)]),
    "nic": (7, "nic", [("ib_port_down", None)]),
    "nccl_watchdog": (7, "none", []),
    "silent_data_corruption": (6, "none", []),
    "gpu_thermal": (6, "gpu", [("thermal", None)]),
    "ssd": (3, "host_down", []),
    "power_supply": (3, "host_down", []),
    "server_chassis": (2, "host_down", []),
    "io_expansion_board": (2, "host_down", []),
    "dependency": (2, "none", []),
    "cpu": (2, "host_down", []),
    "system_memory": (2, "host_down", []),
}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def fault_plan(*, hosts: int, days: float, rate: float, seed: int) -> list[dict]:
    """The faults to inject: [{at, cause, signal, kind, xid, host (index), gpu (index)}] sorted by time."""
    rng = random.Random(seed)
    factor = hosts / 2048 * days / 54 * rate
    exact = {c: n * factor for c, (n, _, _) in CAUSES.items()}
    counts = {c: int(v) for c, v in exact.items()}
    left = round(sum(exact.values())) - sum(counts.values())
    for c in sorted(exact, key=lambda c: exact[c] - counts[c], reverse=True)[:max(0, left)]:
        counts[c] += 1
    faults = []
    for cause, n in counts.items():
        _, signal, kinds = CAUSES[cause]
        for _ in range(n):
            kind, xid = rng.choice(kinds) if kinds else (signal, None)
            at = T0 + dt.timedelta(seconds=rng.randrange(60, int(days * 86400)))
            faults.append({"at": at, "cause": cause, "signal": signal, "kind": kind, "xid": xid,
                           "host": rng.randrange(hosts), "gpu": rng.randrange(8)})
    faults.sort(key=lambda f: f["at"])
    return faults


# ---------------------------------------------------------------------------------------------- independent check
def _month_bounds(at: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + dt.timedelta(days=32)).replace(day=1)
    return start, end


def credits_from_log(path: str) -> dict:
    """{(vm, "YYYY-MM"): {"down_min", "credit"}} from the replay's JSON-lines log alone: held time from the VM's
    `vm_active` to `billing_until` (the VM runs to the end of the last month), provider-fault downtime from each
    `provider_fault` (the instant the product took the device out, for a VM on it) to the VM's `vm_moved` off that
    host (or `billing_until`), whole minutes rounded up per month; billed = price x (held - down); credit = the
    tier's percentage (lowest `below` the uptime is strictly under) of billed, to the cent."""
    lines = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    head = next(x for x in lines if x["type"] == "config")
    until = dt.datetime.fromisoformat(head["billing_until"])
    price = Decimal(head["hourly_price"])
    tiers = {k: [(Decimal(b), Decimal(p)) for b, p in v] for k, v in head["tiers"].items()}
    vms = {x["vm"]: x for x in lines if x["type"] == "vm_active"}
    down: dict[str, list] = defaultdict(list)
    opened: dict[tuple, dt.datetime] = {}
    for x in lines:
        if x["type"] == "provider_fault":
            for vm in x["vms"]:
                opened.setdefault((vm, x["host"]), dt.datetime.fromisoformat(x["t"]))
        elif x["type"] == "vm_moved":
            start = opened.pop((x["vm"], x["from_host"]), None)
            if start is not None:
                down[x["vm"]].append((start, dt.datetime.fromisoformat(x["t"])))
    for (vm, _host), start in opened.items():
        down[vm].append((start, until))
    out = {}
    for vm, spans in down.items():
        active = dt.datetime.fromisoformat(vms[vm]["t"])
        month_start, _ = _month_bounds(min(s for s, _ in spans))
        while month_start < until:
            _, month_end = _month_bounds(month_start)
            lo, hi = max(active, month_start), min(until, month_end)
            held_s = Decimal((hi - lo).total_seconds())
            down_s = sum((Decimal((min(e, hi) - max(s, lo)).total_seconds()) for s, e in spans
                          if min(e, hi) > max(s, lo)), Decimal(0))
            if down_s > 0:
                down_min = min(math.ceil(down_s / 60), held_s / 60)
                uptime = Decimal(100) * (held_s / 60 - down_min) / (held_s / 60)
                matching = [(b, p) for b, p in tiers[vms[vm]["tier"]] if uptime < b]
                pct = min(matching)[1] if matching else Decimal(0)
                billed = (price * (held_s - down_s) / 3600).quantize(Decimal("0.01"), ROUND_HALF_UP)
                credit = (billed * pct / 100).quantize(Decimal("0.01"), ROUND_HALF_UP)
                out[(vm, month_start.strftime("%Y-%m"))] = {"down_min": int(down_min), "credit": str(credit)}
            month_start = month_end
    return out


# ---------------------------------------------------------------------------------------------- the replay
class Replay:
    def __init__(self, *, hosts: int, days: float, rate: float, seed: int, log_path: str, vm_share: float = 0.7,
                 out=print, configure_driver: bool = True):
        self.configure_driver = configure_driver
        self.n_hosts, self.days, self.rate, self.seed = hosts, days, rate, seed
        self.log_path, self.vm_share, self.out = log_path, vm_share, out
        self.log = open(log_path, "w")  # noqa: SIM115
        self.dead: dict = {}  # host pk -> last heartbeat (silent hosts)
        self.drain = []  # (observed_at, drained_at, fault_at, cause)
        self.episodes: list[dict] = []  # a VM hit on a host: {vm, host (pk), cause, at, moved, recreate}
        self.open_ep: dict[str, dict] = {}  # vm id -> its episode still on the failed host
        self.moves: list[float] = []

    def write(self, **row) -> None:
        self.log.write(json.dumps(row, default=str) + "\n")

    # -- seeding
    def seed_fleet(self) -> None:
        from django.conf import settings

        from apps.billing.models import SlaTier
        from apps.billing.services import price_book_create
        from apps.billing.skus import sku_for
        from apps.compute.drivers.fake import FakeDriver
        from apps.compute.models import Flavor, Image
        from apps.compute.services.hypervisor import forget_drivers
        from apps.compute.services.instances import instance_create
        from apps.identity.models import User
        from apps.inventory.models import AgentCredential, Gpu, Host, Region, Zone
        from apps.tenancy.models import Membership, Organization, Project, Quota
        from apps.tenancy.quotas import PLANS

        if self.configure_driver:  # the test suite's `fake_driver` fixture does this (and undoes it) itself
            settings.DRIVERS = {**getattr(settings, "DRIVERS", {}), "compute": "apps.compute.drivers.fake:FakeDriver"}
            FakeDriver.reset()
            forget_drivers()
            settings.HEALTH_FENCE_DRIVER = "fake"  # every host's BMC powers off when asked and reads back off
        for code, schedule in TIERS.items():
            row = SlaTier.objects.get(code=code)
            assert [(str(e["below"]), str(e["credit_pct"])) for e in row.credit_schedule] == \
                [(b, p) for b, p in schedule], f"tier {code} changed: update TIERS"
        with self.clock(T0):
            self.org = Organization.objects.create(slug="replay", name="Replay", plan="enterprise")
            # the plan's limits, raised so one tenant may fill the fleet (an enterprise plan holds ~512 such VMs)
            Quota.objects.bulk_create([Quota(organization=self.org, resource=r, limit=max(v, 10**9))
                                       for r, v in PLANS["enterprise"].items()])
            self.project = Project.objects.create(organization=self.org, slug="replay", name="Replay")
            self.owner = User.objects.create_user("replay@example.com")
            Membership.objects.create(user=self.owner, organization=self.org, role="owner")
            zone = Zone.objects.create(region=Region.objects.create(name="replay"), name="replay-a")
            hosts = Host.objects.bulk_create([
                Host(name=f"r{n:05d}", zone=zone, serial=f"RP{n}", state="available", provisioning_kind="hypervisor",
                     libvirt_uri=f"fake://r{n:05d}", cpu_threads=224, cpu_cores=112, memory_mib=2 * 1024 * 1024,
                     numa_nodes=2, last_heartbeat_at=T0) for n in range(self.n_hosts)])
            Gpu.objects.bulk_create([Gpu(host=h, index=i, model="H100-SXM5-80GB", uuid=f"GPU-rp-{n}-{i}",
                                         serial=f"RP{n}-{i}", pci_address=f"0000:{0x18 + i:02x}:00.0",
                                         numa_node=i // 4) for n, h in enumerate(hosts) for i in range(8)])
            AgentCredential.objects.bulk_create([AgentCredential(host=h, prefix=f"rp{n}", secret_hash="-")
                                                 for n, h in enumerate(hosts)])
            from apps.baremetal.services.secrets import credentials_encrypt
            from apps.health.models import FenceDevice

            token = credentials_encrypt({"username": "replay", "password": "replay"})  # every host has a BMC
            FenceDevice.objects.bulk_create([FenceDevice(host=h, address=f"https://bmc-{h.name}.replay.test",
                                                         credentials_encrypted=token) for h in hosts])
            self.hosts = list(Host.objects.order_by("name"))
            self.host_names = {h.pk: h.name for h in self.hosts}
            self.flavor = Flavor.objects.create(name="h100-8x", vcpus=96, memory_mib=512 * 1024, gpu_form="gpu",
                                                gpu_model="H100-SXM5-80GB", gpu_count=8)
            image = Image.objects.create(name="replay-img", os="ubuntu", source_url="https://images.test/r.qcow2",
                                         checksum="")
            sku = sku_for("flavor", name="h100-8x")
            price_book_create(actor=None, name="list", currency="USD", effective_from=dt.datetime(2026, 1, 1, tzinfo=UTC),
                              prices=[{"sku": sku, "sla_tier": t, "pricing_model": "on_demand",
                                       "unit_price": HOURLY_PRICE} for t in TIERS])
            n_vms = round(self.n_hosts * self.vm_share)
            ops = []
            for i in range(n_vms):
                _inst, op = instance_create(actor=self.owner, project=self.project, name=f"vm-{i:05d}",
                                            flavor_id=self.flavor.pk, image_id=image.pk,
                                            sla_tier="standard" if i % 2 == 0 else "premium")
                ops.append(op.pk)
                if len(ops) >= 50:
                    self.run_operations()
                    ops = []
            self.run_operations()
        from apps.compute.models import Instance

        bad = Instance.objects.exclude(status="active").count()
        assert bad == 0, f"{bad} VMs did not become active"
        for inst in Instance.objects.all():
            self.write(type="vm_active", t=inst.launched_at or T0, vm=str(inst.pk), host=inst.host.name,
                       tier=inst.sla_tier)

    # -- machinery
    def clock(self, at):
        import time_machine

        return time_machine.travel(at, tick=False)

    def open_operations(self) -> list:
        from apps.operations.models import TERMINAL, Operation

        return list(Operation.objects.exclude(status__in=TERMINAL).order_by("created_at").values_list("pk", flat=True))

    def run_operations(self, rounds: int = 30) -> None:
        """Every open operation's due steps, as the workers would run them right away, until none progresses."""
        from apps.operations.runner import operation_run_step

        for _ in range(rounds):
            progressed = False
            for pk in self.open_operations():
                before = self._op_state(pk)
                operation_run_step(pk)
                progressed |= self._op_state(pk) != before
            self.answer_agents()
            if not progressed:
                return

    def _op_state(self, pk):
        from apps.operations.models import Operation

        return Operation.objects.filter(pk=pk).values_list("status", "step", "updated_at").first()

    def answer_agents(self) -> int:
        """Each live agent's cycle: its queued commands reported done (the real report service)."""
        from apps.inventory.models import AgentCommand, AgentCredential
        from apps.inventory.services.agent import agent_command_report

        n = 0
        for cmd in AgentCommand.objects.filter(status="queued").exclude(host_id__in=list(self.dead)) \
                .select_related("host")[:500]:
            cred = AgentCredential.objects.get(host=cmd.host)
            agent_command_report(credential=cred, command_id=cmd.pk, succeeded=True, result={"health": "ok"})
            n += 1
        return n

    def flush_heartbeats(self, at) -> None:
        """The batched last-seen flush: every live agent heartbeated on its 15 s grid."""
        from apps.inventory.models import Host

        Host.objects.exclude(pk__in=list(self.dead)).update(last_heartbeat_at=at)

    def busy(self) -> bool:
        from django.db.models import Q

        from apps.core.clock import now
        from apps.health.models import Remediation
        from apps.inventory.models import AgentCommand

        # a remediation past its deadline that waits for capacity is retried at every beat, but nothing frees
        # capacity in this replay except another remediation (counted here) or a repair (none yet): not due
        moving = Remediation.objects.filter(status__in=["approved", "running"]) | Remediation.objects.filter(
            Q(status="notice") & (Q(deadline_at__gt=now()) | ~Q(reason__startswith="waiting for capacity")))
        from apps.health.models import HostFence
        from apps.health.states import OPEN_FENCE

        return bool(
            moving.exists()
            or HostFence.objects.filter(status__in=OPEN_FENCE).exists()
            or self.open_operations()
            or AgentCommand.objects.filter(status="queued").exclude(host_id__in=list(self.dead)).exists()
            or self.waiting_silent
        )

    # -- faults
    def inject(self, f: dict, t: dt.datetime) -> None:
        """Apply fault `f` whose agent report (or silence) falls due at `t`."""
        from apps.compute.models import Instance
        from apps.health.services.ingest import health_event_ingest

        host = self.hosts[f["host"]]
        vms = [str(p) for p in Instance.objects.filter(host=host, status="active").values_list("pk", flat=True)]
        self.write(type="fault", t=f["at"], cause=f["cause"], signal=f["signal"], kind=f["kind"], xid=f["xid"],
                   host=host.name, gpu=f["gpu"], vms=vms)
        if f["signal"] == "none" or host.pk in self.dead:  # nothing to see, or an agent already silent
            return
        for vm in vms:
            if vm not in self.open_ep:
                self.open_ep[vm] = {"vm": vm, "host": host.pk, "cause": f["cause"], "at": f["at"], "moved": None,
                                    "recreate": False}
                self.episodes.append(self.open_ep[vm])
        if f["signal"] == "host_down":
            if host.pk not in self.dead:
                last = f["at"] - dt.timedelta(seconds=(f["at"] - T0).total_seconds() % TICK)
                from apps.inventory.models import Host

                Host.objects.filter(pk=host.pk).update(last_heartbeat_at=last)
                self.dead[host.pk] = last
                self.waiting_silent.add(host.pk)
            return
        event, _ = health_event_ingest(
            actor=None, host=host, kind=f["kind"], xid=f["xid"],
            gpu_index=f["gpu"] if f["signal"] == "gpu" else None,
            observed_at=f["at"], dedup_key=f"replay:{f['n']}")
        self.after_event(event, f)

    def after_event(self, event, f: dict | None) -> None:
        from apps.core.clock import now

        t = now()
        applied = event.applied or {}
        takes_out = [a for a in applied.get("actions", []) if a in ("gpu_mark_faulty", "host_mark_faulty",
                                                                    "host_drain", "host_cordon")]
        self.write(type="event", t=t, observed_at=event.observed_at, host=event.host.name, kind=event.kind,
                   xid=event.xid, cls=event.classification, actions=applied.get("actions", []),
                   remediations=applied.get("remediations", []), incident=applied.get("incident"))
        if takes_out:
            fault_at = f["at"] if f else event.observed_at
            self.drain.append(((t - event.observed_at).total_seconds(), (t - fault_at).total_seconds(),
                               f["cause"] if f else event.kind))
        from apps.inventory.models import Incident

        if "recreate_vm" in (event.effects or []):
            for ep in self.open_ep.values():
                if ep["host"] == event.host_id and not ep["recreate"]:
                    ep["recreate"], ep["recreate_from"] = True, event.observed_at
        if applied.get("incident") and Incident.objects.filter(pk=applied["incident"], provider_at_fault=True).exists():
            inc = Incident.objects.get(pk=applied["incident"])
            vms = list(event.impacts.filter(resource_type="instance").values_list("resource_id", flat=True))
            self.write(type="provider_fault", t=inc.start, host=event.host.name, incident=str(inc.pk),
                       vms=[str(v) for v in vms])

    def observe_moves(self, t) -> None:
        from apps.compute.models import Instance

        for vm, ep in list(self.open_ep.items()):
            host_id = Instance.objects.filter(pk=vm).values_list("host_id", flat=True).first()
            if host_id != ep["host"]:  # left the failed host (placed elsewhere, or released and not yet placed)
                ep["moved"] = t
                del self.open_ep[vm]
                self.write(type="vm_moved", t=t, vm=vm, from_host=self.host_names[ep["host"]])

    def tick(self, t) -> None:
        from django.conf import settings

        from apps.health.schedule import BEAT_SCHEDULE
        from apps.health.services.fencing import fences_advance
        from apps.health.services.heartbeat import heartbeat_lost_detect
        from apps.health.services.remediation import remediations_advance

        # the production periods: the batched last-seen flush and the heartbeat-lost beat (both multiples of 15 s)
        flush_s = settings.AGENT_LAST_SEEN_FLUSH_SECONDS
        lost_s = int(BEAT_SCHEDULE["health-heartbeat-lost-detect"]["schedule"])
        with self.clock(t):
            secs = int((t - T0).total_seconds())
            if secs % flush_s == 0:
                self.flush_heartbeats(t)
            if secs % lost_s == 0:
                for event in heartbeat_lost_detect():
                    self.waiting_silent.discard(event.host_id)
                    self.after_event(event, None)
            fences_advance()  # beat, 15 s: a silent host's power-off and its read-back
            self.answer_agents()
            remediations_advance()
            self.run_operations()
            remediations_advance()
            self.observe_moves(t)

    def run(self) -> dict:
        self.waiting_silent: set = set()
        plan = fault_plan(hosts=self.n_hosts, days=self.days, rate=self.rate, seed=self.seed)
        for n, f in enumerate(plan):
            f["n"] = n
        end = T0 + dt.timedelta(days=self.days)
        t = T0
        queue = list(plan)
        while queue or self.busy():
            if queue and not self.busy():  # nothing due: jump to the grid instant at or after the next report
                nxt = queue[0]["at"]
                jump = T0 + dt.timedelta(seconds=math.ceil((nxt - T0).total_seconds() / TICK) * TICK)
                if jump > t:
                    with self.clock(jump - dt.timedelta(seconds=TICK)):
                        self.flush_heartbeats(jump - dt.timedelta(seconds=TICK))
                    t = jump
            with self.clock(t):
                while queue and queue[0]["at"] <= t:
                    self.inject(queue.pop(0), t)
            self.tick(t)
            t += dt.timedelta(seconds=TICK)
        self.end = max(t, end)
        return {"faults": len(plan), "by_cause": Counter(f["cause"] for f in plan)}

    def bill(self) -> dict:
        """Usage, downtime and the invoice run of every month the replay touched; returns SlaReport figures."""
        from apps.billing.models import SlaReport
        from apps.billing.services import downtime_sync, invoice_run_execute, usage_record_collect

        months = []
        m, _ = _month_bounds(T0)
        while m < self.end:
            months.append(m)
            m = _month_bounds(m)[1]
        until = _month_bounds(months[-1])[1]
        self.write(type="config", billing_until=until, hourly_price=str(HOURLY_PRICE),
                   tiers={k: v for k, v in TIERS.items()})
        for m in months:
            m_end = _month_bounds(m)[1]
            with self.clock(m_end + dt.timedelta(days=1)):
                self.flush_heartbeats(m_end + dt.timedelta(days=1))
                usage_record_collect(window_start=m, window_end=m_end)
                downtime_sync(window_start=m, window_end=m_end)
                invoice_run_execute(period=m.strftime("%Y-%m"))
        self.log.close()
        return {(str(r.resource_id), r.period): {"down_min": int(r.downtime_minutes), "credit": str(r.credit_amount)}
                for r in SlaReport.objects.filter(resource_type="instance")}


def replay(*, hosts: int, days: float, rate: float = 1.0, seed: int = 1, log_path: str,
           vm_share: float = 0.7, out=print, configure_driver: bool = True) -> dict:
    """Seed, replay and bill on the configured database (Django set up, migrated); returns the figures."""
    started = time.perf_counter()
    r = Replay(hosts=hosts, days=days, rate=rate, seed=seed, log_path=log_path, vm_share=vm_share, out=out,
               configure_driver=configure_driver)
    r.seed_fleet()
    setup_s = time.perf_counter() - started
    out(f"seeded {hosts} hosts, {round(hosts * vm_share)} VMs in {setup_s:.1f} s")
    started = time.perf_counter()
    info = r.run()
    product = r.bill()
    wall_s = time.perf_counter() - started
    mine = credits_from_log(log_path)
    keys = set(product) | set(mine)
    zero = {"down_min": 0, "credit": "0.00"}
    mismatched = sorted(k for k in keys if product.get(k, zero) != mine.get(k, zero))
    credit_mismatches = sum(1 for k in mismatched
                            if Decimal(product.get(k, zero)["credit"]) != Decimal(mine.get(k, zero)["credit"]))
    for k in mismatched[:10]:
        out(f"mismatch {k}: billing {product.get(k)} log {mine.get(k)}")

    from apps.compute.models import Instance
    from apps.health.models import Remediation

    # an episode (a VM on a host when a fault the product can see hit it) is recovered when the VM left that host
    # and runs (active) at the end: no step of the replay is a human's
    active = set(str(p) for p in Instance.objects.filter(status="active").values_list("pk", flat=True))
    recovered = recreate_n = recreate_ok = 0
    by_cause: dict[str, list] = defaultdict(lambda: [0, 0])
    for ep in r.episodes:
        ok = bool(ep["moved"] and ep["vm"] in active)
        recovered += ok
        recreate_n += ep["recreate"]
        recreate_ok += ok and ep["recreate"]
        by_cause[ep["cause"]][0] += 1
        by_cause[ep["cause"]][1] += ok
        if ok:  # from the fault whose row re-creates the VM (an earlier one on the host may not have moved it)
            r.moves.append((ep["moved"] - ep.get("recreate_from", ep["at"])).total_seconds())
    for cause, (n, ok) in sorted(by_cause.items()):
        out(f"  {cause:26s} affected VMs {n:4d} recovered {ok:4d}")
    rem = Counter(Remediation.objects.values_list("status", flat=True))
    detect = [d for d, _, _ in r.drain]
    fault = [f for _, f, _ in r.drain]
    return {
        "hosts": hosts, "gpus": 8 * hosts, "days": days, "rate": rate, "faults": info["faults"],
        "faults_by_cause": dict(info["by_cause"]),
        "drains": len(detect),
        "detect_to_drain_p50_s": _pct(detect, 50), "detect_to_drain_p99_s": _pct(detect, 99),
        "fault_to_drain_p99_s": _pct(fault, 99),
        "affected_vms": len(r.episodes), "recovered_vms": recovered,
        "recovered_pct": round(100 * recovered / len(r.episodes), 2) if r.episodes else None,
        "affected_recreate_class": recreate_n,
        "recovered_pct_recreate_class": round(100 * recreate_ok / recreate_n, 2) if recreate_n else None,
        "affected_by_cause": {c: {"affected": n, "recovered": ok} for c, (n, ok) in sorted(by_cause.items())},
        "fault_to_recovered_p50_s": _pct(r.moves, 50), "fault_to_recovered_p99_s": _pct(r.moves, 99),
        "remediations": dict(rem),
        "sla_reports": len(product), "credited_vm_months": sum(1 for v in product.values() if Decimal(v["credit"])),
        "credit_mismatches": credit_mismatches, "downtime_mismatches": len(mismatched) - credit_mismatches,
        "simulated_s": (r.end - T0).total_seconds(), "setup_s": round(setup_s, 1), "wall_s": round(wall_s, 1),
        "log": log_path,
    }


def _recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "root",
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=2048)
    p.add_argument("--days", type=float, default=54)
    p.add_argument("--scale", type=float, default=1.0, help="multiplies --hosts")
    p.add_argument("--rate", type=float, default=1.0, help="multiplies the failure rate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log", default=str(ROOT / "var" / "fault_replay.jsonl"), help="the replay's JSON-lines log")
    args = p.parse_args()
    db = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    _recreate_database(db)
    os.environ.update(DATABASE_URL=db, DJANGO_SETTINGS_MODULE="gpucloud.settings", CELERY_BROKER_URL="memory://",
                      CELERY_RESULT_BACKEND="cache+memory://")
    os.environ.setdefault("SECRET_KEY", "bench-fault-replay-" + "x" * 50)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    hosts = max(1, round(args.hosts * args.scale))
    result = replay(hosts=hosts, days=args.days, rate=args.rate, seed=args.seed, log_path=args.log,
                    out=lambda line: print(line, flush=True))
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
