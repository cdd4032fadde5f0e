"""Many processes on one PostgreSQL: 3 gunicorn web processes (deploy/gunicorn.conf.py), 3 Celery workers
(prefork) and 2 beat processes, while instance and cluster creates arrive concurrently through the API and one
worker is killed (SIGKILL, its whole process group) every `KILL_EVERY_S` seconds and replaced by a new one.
Every `MACHINE_EVERY`-th kill takes a whole "machine" instead: a web process, a worker and a beat together
(alternately the machine of the beat that holds the beat lock, and the third machine, which runs no beat), all
SIGKILLed at once and started again. The API clients do what a client behind a load balancer does when its
connection drops: send the same request, with the same `Idempotency-Key`, to another web process.

The compute driver is libvirt's test driver hosted by a libvirtd this test starts (`test+unix:///default?socket=`),
so every process sees the same domains; the test holds one connection to it throughout (the test driver forgets
its domains when its last connection closes). The workers run `tests.operations.scale_probe`, which counts each
committed step and each periodic task sent, received and run, in two tables of the test database.

Count: 300 single-GPU instances and 30 clusters of 2 members (`GPUCLOUD_SCALE_INSTANCES`, `GPUCLOUD_SCALE_CLUSTERS`
change them for a measurement). On the 2-core CI machine, shared with other work (load average up to 11), the
creates settled in 127 s to 213 s with 11 to 19 workers killed and the test took 3 to 4 minutes
(docs/deployment.md, "Processes"); `DEADLINE_S` (480 s) bounds the wait so the test stays within 10 minutes.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import libvirt
import pytest
import redis
import requests
from django.conf import settings
from django.db import connection

from apps.compute.drivers.libvirt import LibvirtDriver
from apps.compute.models import Cluster, Flavor, Image, Instance
from apps.core.clock import now
from apps.identity.models import User
from apps.identity.services import api_token_create
from apps.inventory.models import AgentCredential
from apps.operations import workflows
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from apps.tenancy.models import Membership, Organization, Project, Quota
from apps.tenancy.quotas import PLANS
from tests.scheduling import fleet
from tests.storage.libvirt_daemon import session_daemon_start, session_daemon_stop

from . import scale_probe

ROOT = Path(settings.BASE_DIR)
sys.path.insert(0, str(ROOT))
from bench import instances as bench_instances  # noqa: E402  (process helpers and the agent stand-in)

INSTANCES = int(os.environ.get("GPUCLOUD_SCALE_INSTANCES", "300"))
CLUSTERS = int(os.environ.get("GPUCLOUD_SCALE_CLUSTERS", "30"))
CLUSTER_SIZE = 2
WEB, WORKERS, BEATS = 3, 3, 2
KILL_EVERY_S = 10.0
#: every this many kills, a whole machine (web + worker + beat) instead of one worker
MACHINE_EVERY = 4
#: the beats run at least this long, so the 15 s and 30 s periodic tasks are sent a few times
MIN_SPAN_S = 60.0
DEADLINE_S = float(os.environ.get("GPUCLOUD_SCALE_DEADLINE_S", "480"))
QUEUES = "default,provisioning,reconcile,billing,notifications"
#: error codes a killed worker could leave behind: a step cut short and never resumed, or a lost connection
KILL_CODES = {"", "deadline_exceeded", "database_error", "host_unreachable", "libvirt_error", "driver_error"}


class Libvirtd:
    """A private libvirtd session daemon (tests/storage/libvirt_daemon.py) and one connection held open to the
    test driver it hosts, so every process sees the same domains until the test ends."""

    def __init__(self):
        self.proc, self.root, sock = session_daemon_start()
        self.uri = f"test+unix:///default?socket={sock}"
        self.holder = libvirt.open(self.uri)

    def stop(self) -> None:
        self.holder.close()
        session_daemon_stop(self.proc, self.root)


class Fleet:
    """The processes: web, workers and beats, each a process group; workers are named scale<N>."""

    def __init__(self, env: dict, logs: Path):
        self.env, self.logs, self.next_worker = env, logs, 0
        self.ports = [bench_instances._free_port() for _ in range(WEB)]
        venv = Path(sys.executable).parent
        self.venv, self.generation = venv, 0
        self.web = [self.start_web(i) for i in range(WEB)]
        self.beat_logs: list[Path] = [logs / "unused"] * BEATS
        self.beats = [self.start_beat(i) for i in range(BEATS)]
        self.workers = [self.start_worker() for _ in range(WORKERS)]
        self.killed: list[str] = []
        #: (machine index, whether its beat held the lock, when) for each machine killed
        self.machines_killed: list[tuple[int, bool, dt.datetime]] = []

    def start_web(self, i: int) -> subprocess.Popen:
        self.generation += 1
        return self._start([str(self.venv / "gunicorn"), "--config", "deploy/gunicorn.conf.py",
                            "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{self.ports[i]}", "--workers", "1",
                            "--threads", "4", "--log-level", "warning"], f"web{i}-{self.generation}")

    def start_beat(self, i: int) -> subprocess.Popen:
        """Beat `i`, logging to a file of its own per start (the lock holder is found by its log)."""
        self.generation += 1
        self.beat_logs[i] = self.logs / f"beat{i}-{self.generation}.log"
        return self._start([sys.executable, "-m", "celery", "-A", "tests.operations.scale_probe", "beat",
                            "--schedule", str(self.logs / f"beat{i}-{self.generation}-schedule"),
                            "--loglevel", "INFO"], self.beat_logs[i].stem)

    def leader(self) -> int | None:
        held = [i for i, log in enumerate(self.beat_logs) if log.exists() and "beat_lock_acquired" in log.read_text()]
        return held[0] if len(held) == 1 else None

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen:
        return bench_instances._start(cmd, self.env, log=self.logs / f"{name}.log", new_session=True)

    def start_worker(self) -> tuple[str, subprocess.Popen]:
        name = f"scale{self.next_worker}"
        self.next_worker += 1
        return name, self._start([sys.executable, "-m", "celery", "-A", "tests.operations.scale_probe", "worker",
                                  "--pool", "prefork", "--concurrency", "2", "-Q", QUEUES, "-n", f"{name}@%h",
                                  "--without-gossip", "--without-mingle", "--loglevel", "INFO"], name)

    def kill_one(self) -> None:
        name, proc = self.workers.pop(0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        self.killed.append(name)
        self.workers.append(self.start_worker())

    def kill_machine(self) -> None:
        """SIGKILL a web process, a worker and (on machines 0 and 1) a beat at once, then start them again. Odd
        machine kills take the lock holder's machine, even ones the machine without a beat."""
        leader = self.leader()
        i = leader if len(self.machines_killed) % 2 == 0 and leader is not None else WEB - 1
        at = now()
        procs = [self.web[i], *([self.beats[i]] if i < BEATS else [])]
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
        self.kill_one()
        for p in procs:
            p.wait(10)
        self.machines_killed.append((i, i == leader, at))
        self.web[i] = self.start_web(i)
        if i < BEATS:
            self.beats[i] = self.start_beat(i)

    def stop(self) -> None:
        procs = self.web + self.beats + [p for _n, p in self.workers]
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def _env(tmp_path: Path, broker: str) -> dict:
    db = connection.settings_dict
    url = f"postgres://{db.get('USER') or ''}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url.replace("//@", "//"), "CELERY_BROKER_URL": broker,
            "CELERY_RESULT_BACKEND": broker, "COMPUTE_SEED_DIR": str(tmp_path / "seeds"), "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "gpucloud.settings"}


def _broker_empty() -> str:
    """The broker: this run's Redis database (REDIS_URL), its Celery queues emptied."""
    url = os.environ.get("REDIS_URL", settings.REDIS_URL)
    r = redis.Redis.from_url(url)
    keys = [*QUEUES.split(","), "unacked", "unacked_index", "unacked_mutex"]
    r.delete(*keys, *r.keys("_kombu.binding.*"))
    return url


def _world(uri: str, hosts: int) -> dict:
    org = Organization.objects.create(slug="scale", name="Scale", plan="enterprise")
    Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v) for r, v in PLANS["enterprise"].items()])
    project = Project.objects.create(organization=org, slug="scale", name="Scale")
    owner = User.objects.create_user("scale@example.com")
    Membership.objects.create(user=owner, organization=org, role="owner")
    _row, token = api_token_create(actor=None, user=owner, name="scale", scope="write", organization=org)
    su, leaves = fleet.su_with_leaves("su-scale", rails=2)
    for n in range(hosts):
        h = fleet.host(gpus=8, su=su, nvswitch="")
        h.libvirt_uri, h.provisioning_kind = uri, "hypervisor"
        h.save(update_fields=["libvirt_uri", "provisioning_kind"])
        fleet.cable(h, leaves)
        AgentCredential.objects.create(host=h, prefix=f"scale{n}", secret_hash="-")
    flavor = Flavor.objects.create(name="scale-1gpu", vcpus=4, memory_mib=16384, gpu_form="gpu",
                                   gpu_model="H100-SXM5-80GB", gpu_count=1)
    image = Image.objects.create(name="scale-img", os="ubuntu", source_url="https://images.test/scale.qcow2",
                                 checksum="")
    return {"token": token, "project": str(project.pk), "flavor": str(flavor.pk), "image": str(image.pk)}


def _create_all(ports: list[int], world: dict) -> tuple[list[str], list[str]]:
    """POST every instance and cluster from 8 client threads, spread over the web processes. Returns the
    instance ids and cluster ids the API accepted (asserting every create was accepted)."""
    body = {"project": world["project"], "flavor": world["flavor"], "image": world["image"]}
    local = threading.local()
    retried: list[str] = []

    def send(i: int, path: str, payload: dict, key: str) -> requests.Response:
        """POST to web process i, and on a dropped connection (a killed web process) the same request with the
        same key to the next one, as a client behind a load balancer would."""
        for attempt in range(20):
            base = f"http://127.0.0.1:{ports[(i + attempt) % len(ports)]}/api/v1"
            try:
                return local.s.post(f"{base}/{path}/", json=payload, headers={"Idempotency-Key": key}, timeout=60)
            except requests.ConnectionError:
                retried.append(key)
                local.s = _session()
                time.sleep(0.5)
        raise AssertionError(f"no web process answered {key}")

    def _session() -> requests.Session:
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {world['token']}"
        return s

    def post(job: tuple[str, int]) -> tuple[str, str]:
        kind, i = job
        if not hasattr(local, "s"):
            local.s = _session()
        if kind == "instance":
            r = send(i, "instances", {**body, "name": f"vm-{i}"}, f"scale-vm-{i}")
            assert r.status_code == 202, r.text[:300]
            return kind, r.json()["instance"]["id"]
        r = send(i, "clusters", {**body, "name": f"cl-{i}", "size": CLUSTER_SIZE}, f"scale-cl-{i}")
        assert r.status_code == 201, r.text[:300]
        return kind, r.json()["id"]

    jobs = [("instance", i) for i in range(INSTANCES)] + [("cluster", i) for i in range(CLUSTERS)]
    jobs.sort(key=lambda j: j[1] * (INSTANCES // max(1, CLUSTERS)) if j[0] == "cluster" else j[1])  # interleave
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(post, jobs))
    print(f"{len(retried)} creates sent again after a killed web process dropped them")
    return [v for k, v in done if k == "instance"], [v for k, v in done if k == "cluster"]


def _progress(instance_ids: list[str]) -> dict:
    """What a run that missed its deadline was doing: instances by status, unfinished operations by next step."""
    from collections import Counter

    statuses = Counter(Instance.objects.filter(pk__in=instance_ids).values_list("status", flat=True))
    steps = Counter(f"{op.kind}:{op.status}:{len(op.steps_done)}" for op in
                    Operation.objects.filter(kind__in=("instance.create", "cluster.create"))
                    .exclude(status__in=("succeeded", "failed")))
    return {"instances": dict(statuses), "operations (kind:status:steps done)": dict(steps.most_common(8))}


def _settled(instance_ids: list[str], cluster_ids: list[str]) -> bool:
    if Cluster.objects.filter(pk__in=cluster_ids, status="pending").exists():
        return False
    members = Instance.objects.filter(cluster_id__in=cluster_ids)
    return not (Instance.objects.filter(pk__in=instance_ids) | members).exclude(status__in=("active", "error")).exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_many_web_worker_and_beat_processes_survive_worker_kills(tmp_path):
    started = time.monotonic()
    with connection.cursor() as cur:
        for sql in scale_probe.SCHEMA:
            cur.execute(sql)
    lvd = Libvirtd()
    fleet_ = None
    stop = threading.Event()
    stand_in = threading.Thread(target=bench_instances._agent_stand_in, args=(stop,), daemon=True)
    try:
        world = _world(lvd.uri, hosts=(INSTANCES + CLUSTERS * CLUSTER_SIZE) // 8 + 6)
        fleet_ = Fleet(_env(tmp_path, _broker_empty()), tmp_path)
        for port in fleet_.ports:
            bench_instances._wait_http(f"http://127.0.0.1:{port}")
        stand_in.start()
        beats_from, beats_started = now(), time.monotonic()
        creates_done = threading.Event()
        result: dict = {}

        def create() -> None:
            try:
                result["ids"] = _create_all(fleet_.ports, world)
            finally:
                creates_done.set()

        creator = threading.Thread(target=create)
        creator.start()
        next_kill, kills = time.monotonic() + KILL_EVERY_S, 0
        while time.monotonic() - started < DEADLINE_S:
            if time.monotonic() >= next_kill:
                kills += 1
                fleet_.kill_machine() if kills % MACHINE_EVERY == 0 else fleet_.kill_one()
                next_kill += KILL_EVERY_S
            if (creates_done.is_set() and "ids" in result and time.monotonic() - beats_started >= MIN_SPAN_S
                    and _settled(*result["ids"])):
                break
            time.sleep(0.5)
        creator.join()
        instance_ids, cluster_ids = result["ids"]
        assert _settled(instance_ids, cluster_ids), f"still in progress at the deadline: {_progress(instance_ids)}"
        settled_s = time.monotonic() - started
        beats_until = now()
    finally:
        stop.set()
        if stand_in.is_alive():
            stand_in.join(10)
        if fleet_ is not None:
            fleet_.stop()
    try:
        _check(lvd, fleet_, instance_ids, cluster_ids, beats_from, beats_until, _held_by_dead_workers())
    finally:
        lvd.stop()
        with connection.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {scale_probe.STEP_TABLE}, {scale_probe.PERIODIC_TABLE}")
    print(f"{INSTANCES} instances + {CLUSTERS}x{CLUSTER_SIZE} cluster members settled in {settled_s:.0f} s, "
          f"{len(fleet_.killed)} workers killed, {len(fleet_.machines_killed)} of them with their machine "
          f"({sum(held for _i, held, _at in fleet_.machines_killed)} holding the beat lock); "
          f"whole test {time.monotonic() - started:.0f} s")


def _held_by_dead_workers() -> set[str]:
    """Task ids a worker had taken from the Redis broker but not acknowledged when it died: kombu keeps them in
    the `unacked` hash until the visibility timeout hands them out again (an hour by default, longer than this
    test). Read after the fleet stopped: the workers stopped by SIGTERM have handed theirs back by then."""
    r = redis.Redis.from_url(os.environ.get("REDIS_URL", settings.REDIS_URL))
    held = set()
    for raw in r.hvals("unacked"):
        message = json.loads(raw)[0]
        held.add(message.get("headers", {}).get("id", ""))
    return held


def _check(lvd: Libvirtd, fleet_: Fleet, instance_ids, cluster_ids, beats_from, beats_until,
           unacked: set[str]) -> None:
    all_ids = {str(i) for i in instance_ids} | {
        str(i) for i in Instance.objects.filter(cluster_id__in=cluster_ids).values_list("pk", flat=True)}
    assert len(all_ids) == INSTANCES + CLUSTERS * CLUSTER_SIZE
    rows = list(Instance.objects.filter(pk__in=all_ids).values_list("pk", "status", "error_code", "error_reason"))
    active = {str(pk) for pk, status, *_ in rows if status == "active"}
    failed = [(str(pk), code, reason) for pk, status, code, reason in rows if status != "active"]
    assert len(active) >= 0.95 * len(all_ids), failed[:10]
    assert all(code not in KILL_CODES for _pk, code, _r in failed), failed[:10]

    # each step of each operation committed once, and exactly the steps the operation lists as done
    with connection.cursor() as cur:
        cur.execute(f"SELECT operation_id, step, count(*) FROM {scale_probe.STEP_TABLE} GROUP BY 1, 2")
        counted = {(str(op), step): n for op, step, n in cur.fetchall()}
    assert all(n == 1 for n in counted.values()), {k: n for k, n in counted.items() if n != 1}
    ops = list(Operation.objects.filter(kind__in=("instance.create", "cluster.create")))
    listed = {(str(op.pk), step) for op in ops for step in op.steps_done}
    assert all(len(op.steps_done) == len(set(op.steps_done)) for op in ops)
    assert set(counted) == listed
    for op in ops:
        if op.status == "succeeded":
            assert tuple(op.steps_done) == workflows.get(op.kind).names

    # no leaked allocations: every live allocation belongs to an active instance, one GPU each
    live = list(Allocation.objects.filter(period__contains=now(), resource_class="gpu")
                .values_list("consumer_id", flat=True))
    assert sorted(str(c) for c in live) == sorted(active)

    # no duplicate domains: one managed domain per active instance, names unique
    domains = [d for d in LibvirtDriver(lvd.uri).domain_list() if d.managed]
    assert len({d.name for d in domains}) == len(domains)
    assert sorted(str(d.uuid) for d in domains) == sorted(active)

    # periodic tasks: sent once per period by one beat, each sent task run once (unless the worker that had
    # received it was killed before running it)
    with connection.cursor() as cur:
        cur.execute(f"SELECT event, task_id, task, node, at FROM {scale_probe.PERIODIC_TABLE}")
        events = cur.fetchall()
    span = (beats_until - beats_from).total_seconds()
    killed = {f"{name}@" for name in fleet_.killed}
    # a killed lock holder: the standby takes over within BEAT_STANDBY_RETRY_SECONDS and keeps the period from
    # the dead leader's last send, so each such kill may delay the later sends by up to that much
    leader_kills = [at for _i, held, at in fleet_.machines_killed if held]
    takeover_delay = len(leader_kills) * (settings.BEAT_STANDBY_RETRY_SECONDS + 1)
    periods = _interval_entries()
    assert periods and any(e["period"] * 2 <= span for e in periods)
    for entry in periods:
        sent = sorted(at for ev, _id, task, _n, at in events if ev == "sent" and task == entry["task"])
        period = entry["period"]
        gaps = [(b - a).total_seconds() for a, b in zip(sent, sent[1:], strict=False)]
        assert all(g >= 0.5 * period for g in gaps), (entry, gaps)
        if period * 2 <= span:
            assert len(sent) >= int((span - takeover_delay) // period) - 1, (entry, len(sent), span)
        print(f"periodic {entry['task']} every {period:.0f} s: sent {len(sent)} times in {span:.0f} s")
    ran: dict[str, int] = {}
    received: dict[str, str] = {}
    for ev, task_id, _task, node, _at in events:
        if ev == "ran":
            ran[task_id] = ran.get(task_id, 0) + 1
        elif ev == "received":
            received[task_id] = node
    assert all(n == 1 for n in ran.values()), ran
    beat_kills = [at for i, _held, at in fleet_.machines_killed if i < BEATS]
    for ev, task_id, task, _n, at in events:
        if ev == "sent" and task_id not in ran and at < beats_until - dt.timedelta(seconds=30):
            # recorded just before publishing: a beat killed in between never published it
            if any(dt.timedelta(0) <= k - at <= dt.timedelta(seconds=2) for k in beat_kills):
                continue
            # a killed worker had it (received, or fetched from the broker before it could say so)
            assert task_id in unacked or any(received.get(task_id, "").startswith(k) for k in killed), (
                task, task_id)


def _interval_entries() -> list[dict]:
    from gpucloud.celery import collect_beat_schedule

    out = []
    for entry in collect_beat_schedule().values():
        schedule = entry["schedule"]
        if isinstance(schedule, (int, float)):
            period = float(schedule)
        elif isinstance(schedule, dt.timedelta):
            period = schedule.total_seconds()
        elif hasattr(schedule, "run_every") and not hasattr(schedule, "minute"):
            period = schedule.run_every.total_seconds()
        else:
            continue   # crontab entries: hours apart, outside this test's span
        out.append({"task": entry["task"], "period": period})
    return out
