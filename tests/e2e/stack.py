"""The real gpucloud stack for the end-to-end journey, started from scratch by the test and torn down after it.

- PostgreSQL: a fresh database `gpucloud_e2e_<pid>` on 127.0.0.1 (created, migrated, dropped afterwards);
- Redis db 11 (`E2E_REDIS_URL` to override), flushed before and after;
- gunicorn (the web API) on a free port, a Celery worker (every queue but `notifications`; `--pool threads` because libvirt's
  `test:///default` keeps its domains per process), a second small worker for the `notifications` queue
  (webhook and e-mail delivery, as in `scripts/run.sh`) and Celery beat;
- OVN NB/SB + ovn-northd and ibsim + OpenSM through the networking app's own test helpers
  (`tests/networking/fabrics.py`), wired to the app with `GPUCLOUD_OVN_NB_DB` / `GPUCLOUD_IB_FABRICS`;
- node agents: the real agent's client, executor and fake HGX driver (`agent/gpucloud_agent`), enrolled through
  the API (one thread per host that gets commands);
- libvirt: the sample fleet's hosts use `test:///default` (docs/compute.md), inside the worker process;
- block storage through the libvirt storage driver on the same `test:///default` (`STORAGE_SHARED_POOL_URI`): its
  pools and volumes are the test driver's, and attach, detach and extend take the driver's test-driver path
  (docs/storage.md), so volumes go through the real API, Operation steps and libvirt calls;
- billing meters in one-minute periods (`BILLING_METERING_PERIOD_SECONDS=60`, 3600 in production), so an invoice
  run a few minutes after launch already has closed periods to bill.

The only bootstrap outside the HTTP API is what a fresh installation needs: `migrate` and two staff users with
their first tokens (`create_api_token --staff`, docs/tenancy.md "Getting a first token").
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PG = {"host": "127.0.0.1", "port": 5432, "user": "root"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(fn, *, timeout: float, interval: float = 0.25, what: str = "condition"):
    """Call `fn` until it returns something truthy; that value is returned. AssertionError after `timeout` s
    with the last value, so a failure says what was seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
        time.sleep(interval)


class Api:
    """A bearer-token HTTP client of /api/v1/ that keeps the last response for error messages."""

    def __init__(self, base: str, token: str | None = None):
        self.base = base.rstrip("/") + "/api/v1"
        self.s = requests.Session()
        if token:
            self.s.headers["Authorization"] = f"Bearer {token}"

    def _url(self, path: str) -> str:
        if path.startswith("http"):
            return path
        return f"{self.base}/{path.strip('/')}/"

    def req(self, method: str, path: str, expect: int | tuple | None = None, **kw) -> requests.Response:
        r = self.s.request(method, self._url(path), timeout=60, allow_redirects=False, **kw)
        if expect is not None:
            codes = expect if isinstance(expect, tuple) else (expect,)
            assert r.status_code in codes, f"{method} {path} -> {r.status_code} (expected {expect}): {r.text[:2000]}"
        return r

    def get(self, path, expect=200, **kw):
        return self.req("GET", path, expect, **kw)

    def post(self, path, json=None, expect=(200, 201, 202), **kw):
        return self.req("POST", path, expect, json=json if json is not None else {}, **kw)

    def patch(self, path, json=None, expect=200, **kw):
        return self.req("PATCH", path, expect, json=json or {}, **kw)

    def delete(self, path, expect=(202, 204), **kw):
        return self.req("DELETE", path, expect, **kw)

    def all(self, path: str, **params) -> list[dict]:
        """Every item of a cursor-paginated (or plain list) collection."""
        out, url = [], path
        params = {"page_size": 500, **params}
        while url:
            body = self.get(url, params=params).json()
            if isinstance(body, list):
                return out + body
            out += body["results"]
            url, params = body.get("next"), None
        return out


class Stack:
    def __init__(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="gpc-e2e-"))
        self.db = f"gpucloud_e2e_{os.getpid()}"
        self.redis_url = os.environ.get("E2E_REDIS_URL", "redis://127.0.0.1:6379/11")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.agents = Agents(self.base)
        self.ovn = None
        self.sim = None
        self.env = {**os.environ, "DATABASE_URL": f"postgres://root@127.0.0.1:5432/{self.db}",
                    "REDIS_URL": self.redis_url, "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
                    # the stack runs with DEBUG false, which needs a real key (apps/core/secret_key.py): its own
                    "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "false",
                    "PUBLIC_URL": self.base, "COMPUTE_SEED_DIR": str(self.tmp / "seeds"),
                    "COMPUTE_VIRT_TYPE": "qemu", "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1",
                    # one-minute metering periods, so the journey's invoice bills closed periods within minutes
                    "BILLING_METERING_PERIOD_SECONDS": "60",
                    # volumes in pools of the hosts' libvirt test driver, in the worker's process
                    "STORAGE_SHARED_POOL_URI": "test:///default"}
        for k in ("TEST_DATABASE_NAME", "CELERY_TASK_ALWAYS_EAGER"):
            self.env.pop(k, None)

    # --- lifecycle ----------------------------------------------------------------------------------------
    def _psql(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
            conn.execute(sql)

    def _manage(self, *args: str, timeout: float = 300) -> str:
        r = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"manage.py {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    def _flush_redis(self) -> None:
        import redis

        redis.Redis.from_url(self.redis_url).flushdb()

    def _no_other_worker(self) -> None:
        """Fail fast when another Celery worker consumes this Redis db: it would run our operations' steps against
        its own database (they then stall until the stalled-operation sweep)."""
        r = subprocess.run([str(VENV_BIN / "celery"), "-A", "gpucloud", "inspect", "ping", "--timeout", "1"],
                           cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60)
        assert "pong" not in r.stdout, (f"another Celery worker uses {self.redis_url} (set E2E_REDIS_URL to a free "
                                        f"db):\n{r.stdout[-1000:]}")

    def start(self) -> Stack:
        from apps.networking.drivers.ibsim import SimFabric
        from tests.networking.fabrics import OvnCluster, require_ibsim, require_ovn
        from tests.networking.fabrics import sim_config as _sim_config

        require_ovn()     # skip (naming the Debian packages) when OVN or ibsim/OpenSM are not installed
        require_ibsim()
        self._psql(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        self._psql(f'CREATE DATABASE "{self.db}"')
        self._flush_redis()
        self._no_other_worker()
        self._manage("migrate", "--noinput")
        # A fresh installation's first staff: an operator (fleet, tenants) and a billing admin (prices, invoices).
        self._manage("shell", "-c", (
            "from apps.identity.models import User\n"
            "User.objects.create_user('ops@provider.example', full_name='Ops', staff_role='operator')\n"
            "User.objects.create_user('billing@provider.example', full_name='Billing', staff_role='billing_admin')\n"))
        self.ops_token = self._manage("create_api_token", "--email", "ops@provider.example", "--staff",
                                      "--scope", "write", "--name", "e2e").strip().splitlines()[-1]
        self.billing_token = self._manage("create_api_token", "--email", "billing@provider.example", "--staff",
                                          "--scope", "write", "--name", "e2e").strip().splitlines()[-1]
        # Fabrics: OVN now; ibsim's topology comes from the inventory, so it starts after the fleet import
        # (start_infiniband). Its socket and files are fixed here so the worker can be told where they are.
        self.ovn = OvnCluster().start()
        self.sim = SimFabric("", workdir=str(self.tmp / "ibsim"))
        self.env["GPUCLOUD_OVN_NB_DB"] = self.ovn.nb
        self.env["GPUCLOUD_OVN_GATEWAY_CHASSIS"] = "gw-1"
        self.env["GPUCLOUD_IB_FABRICS"] = json.dumps({"ib-compute": _sim_config(self.sim)})
        logs = self.tmp / "logs"
        logs.mkdir()
        self.web_log = logs / "web.log"
        self._spawn([str(VENV_BIN / "gunicorn"), "--config", "deploy/gunicorn.conf.py", "gpucloud.wsgi:application",
                     "--bind", f"127.0.0.1:{self.port}",
                     "--workers", "2", "--threads", "4", "--timeout", "120", "--error-logfile", "-",
                     "--control-socket", str(self.tmp / "web.ctl")], self.web_log)
        self._spawn([str(VENV_BIN / "celery"), "-A", "gpucloud", "worker", "-Q",
                     "default,provisioning,reconcile,billing", "--pool", "threads", "-c", "4", "--loglevel",
                     "INFO", "-n", f"e2e-{os.getpid()}@%h"], logs / "worker.log")
        self._spawn([str(VENV_BIN / "celery"), "-A", "gpucloud", "worker", "-Q", "notifications", "--pool",
                     "threads", "-c", "2", "--loglevel", "INFO", "-n", f"e2e-notify-{os.getpid()}@%h"],
                    logs / "notify.log")
        self._spawn([str(VENV_BIN / "celery"), "-A", "gpucloud", "beat", "--schedule",
                     str(self.tmp / "celerybeat-schedule"), "--loglevel", "INFO"], logs / "beat.log")
        poll(self._healthy, timeout=90, what="gunicorn /healthz")
        return self

    def _healthy(self) -> bool:
        for p in self.procs:
            assert p.poll() is None, f"{p.args[0]} exited with {p.returncode}; logs in {self.tmp / 'logs'}"
        try:
            return requests.get(f"{self.base}/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def _spawn(self, cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
        fh = open(log, "ab")
        p = subprocess.Popen(cmd, cwd=ROOT, env=env or self.env, stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def start_infiniband(self) -> None:
        """ibsim + OpenSM on the topology of fabric `ib-compute` as the inventory now describes it."""
        from apps.networking.drivers.opensm import render_partitions

        topo = self._manage("shell", "-c", (
            "from apps.inventory.models import Fabric\n"
            "from apps.networking.desired import ibsim_topology\n"
            "print(ibsim_topology(Fabric.objects.get(name='ib-compute')), end='')\n"))
        self.sim.topology.write_text(topo)
        self.sim.start()
        self.sim.start_opensm(render_partitions([]))

    def stop(self, *, keep_logs: bool = False) -> None:
        """Stop everything this stack started, drop its database and flush its Redis db. The temporary directory
        (logs, seeds, ibsim and OVN files) is kept when `keep_logs` (a step failed) and its path printed."""
        self.agents.stop()
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        if self.sim is not None:
            self.sim.stop()
        if self.ovn is not None:
            self.ovn.stop()
        try:
            self._psql(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            self._flush_redis()
        except Exception:  # noqa: BLE001 - teardown must not hide the test's own failure
            pass
        if keep_logs:
            print(f"\ne2e stack logs kept in {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # --- what a human reads ---------------------------------------------------------------------------------
    def invitation_token(self, email: str) -> str:
        """The token of the newest invitation e-mailed to `email` (console e-mail backend: the web log)."""
        def find():
            text = self.web_log.read_text(errors="replace")
            blocks = [b for b in text.split("Content-Type: text/plain") if f"To: {email}" in b]
            if not blocks:
                return None
            m = re.findall(r"accept\?token=([A-Za-z0-9_:\-]+)", blocks[-1].replace("=\n", ""))
            return m[-1] if m else None

        return poll(find, timeout=30, what=f"the invitation e-mail to {email}")

class HostAgent(threading.Thread):
    """`gpucloud-agent run` without the inventory resend: pull commands, execute them on the fake driver, report."""

    def __init__(self, base: str, host_name: str, *, mig: bool, gpu_count: int):
        from gpucloud_agent.backends.fake import FakeBackend
        from gpucloud_agent.client import ControlPlane
        from gpucloud_agent.executor import Executor

        super().__init__(daemon=True, name=f"agent-{host_name}")
        backend = FakeBackend("hgx-h100")
        for i in range(gpu_count):
            backend.state["mig"][str(i)] = mig
        self.cp, self.executor, self.stop = ControlPlane(base), Executor(backend), threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                for command in self.cp.commands():
                    outcome = self.executor.execute(command)
                    self.cp.report(command["id"], outcome["succeeded"], outcome["result"], outcome["error"])
            except Exception as exc:  # noqa: BLE001 - like the real agent: log and keep going
                self.errors.append(str(exc))
                print(f"{self.name}: {exc}", file=sys.stderr)
            self.stop.wait(0.3)


class Agents:
    """The operator's node agents for the sample fleet's hosts, one thread each (`HostAgent`)."""

    def __init__(self, base: str):
        self.base = base
        self.agents: dict[str, HostAgent | None] = {}
        self._lock = threading.Lock()

    def start(self, ops: Api, host_name: str, *, mig: bool = False) -> None:
        """Enroll a node agent for `host_name` through the API and let it execute its commands.

        The agent is the real one's control-plane client, executor and journal (`agent/gpucloud_agent`) on its
        fake HGX H100 driver. Its inventory is the host as the fleet file describes it (the fake driver's own
        identifiers follow DGX naming, which the sample fleet does not use), with every GPU in MIG mode when
        `mig` (as after `nvidia-smi -mig 1`) and 4 SR-IOV VFs per GPU (as after `sriov-manage -e ALL`)."""
        with self._lock:
            if host_name in self.agents:
                return
            self.agents[host_name] = None  # reserved
        try:
            gpus = ops.all("gpus", host=host_name)
            inventory = {"host": {}, "nvswitch": {"active_partitions": []}, "gpus": [
                {"index": g["index"], "uuid": g["uuid"], "serial": g["serial"], "model": g["model"],
                 "pci_address": g["pci_address"], "numa_node": g["numa_node"],
                 "mig": {"enabled": mig, "layout": []},
                 # SR-IOV VFs (sriov-manage -e): a MIG-backed vGPU on Hopper is handed over as a VF
                 "vfs": [{"index": v, "pci_address": f"{g['pci_address'][:7]}:{(v + 4) // 8:02x}.{(v + 4) % 8}"}
                         for v in range(4 if mig else 0)]} for g in gpus]}
            host = ops.all("hosts", name=host_name)[0]
            token = ops.post(f"hosts/{host['id']}/enrollment-token", {"ttl_s": 600}, expect=201).json()["token"]
            agent = HostAgent(self.base, host_name, mig=mig, gpu_count=len(gpus))
            # the fake driver's VFs are the ones reported (it sets their vGPU types and resets them)
            agent.executor.backend.state["vfs"] = [v["pci_address"] for g in inventory["gpus"] for v in g["vfs"]]
            agent.cp.enroll(token, inventory, "e2e")
            agent.start()
            self.agents[host_name] = agent
        except Exception:
            self.agents.pop(host_name, None)
            raise

    def follow_commands(self, ops: Api) -> threading.Event:
        """Start an agent on every host the control plane queues a command for (a thread; set the returned event
        to stop). This is the operator's side of the journey: hosts run their agents."""
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                try:
                    for cmd in ops.all("agent-commands", status="queued"):
                        self.start(ops, cmd["host"])
                except Exception as exc:  # noqa: BLE001 - the journey's own polls report the failure
                    print(f"agent follower: {exc}", file=sys.stderr)
                stop.wait(0.3)

        threading.Thread(target=loop, daemon=True, name="e2e-agents").start()
        return stop

    def stop(self) -> None:
        for agent in self.agents.values():
            if agent is not None:
                agent.stop.set()
