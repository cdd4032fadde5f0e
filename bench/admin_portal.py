"""Benchmark: the admin portal's screens in a real browser (Playwright, Debian's chromium) against a real gunicorn
serving the built console and the API on a fleet of `--hosts` hosts in PostgreSQL.

Usage: python bench/admin_portal.py [--hosts 2000] [--runs 10] [--fill 0.5] [--seed 1] [--reuse]

Needs the built console (`make console`, i.e. `frontend/dist/`) and chromium (`CHROMIUM_PATH`, default
/usr/lib/chromium/chromium). Builds a benchmark-only database (`gpucloud_bench_admin_portal`, dropped and
re-created each run) with the fleet of `bench/fleet_summary.py` (HGX H100 hosts with 8 GPUs each: 2,000 hosts are
16,000 GPUs), starts gunicorn on a free port of 127.0.0.1 (2 workers × 4 threads, as the e2e stack) and signs an
operator in the way the console does (password and authenticator code, a session cookie).

Each of `--runs` navigations opens a new tab in the same browser context (so the console's scripts come from the
browser's cache, as for an operator who has used it before) and measures, in the page, the time from the start of
the navigation (`performance.timeOrigin`) to the first animation frame in which the screen is complete:

- heat map (`/staff/fleet`): every host row of the fleet is in the document;
- capacity (`/staff/capacity`): the capacity table says its data is in (`data-ready="true"`).

`heatmap_requests` is the count of API requests (`/api/`) the browser made for the heat map until it was complete
(the largest over the runs). The last stdout line is one JSON object: `heatmap_p50_s`, `heatmap_max_s`,
`heatmap_requests`, `capacity_p50_s`, `capacity_max_s`, `capacity_requests`, hosts, gpus, runs, the 1-minute load
average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_admin_portal")
os.environ["DEBUG"] = "false"   # served as in production (the bench's own gunicorn shares this environment)
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

import fleet_summary  # noqa: E402
import placement_latency as fleetbench  # noqa: E402  (sets DATABASE_URL for the bench database)

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/lib/chromium/chromium")
EMAIL, PASSWORD = "bench-ops@provider.example", "bench-" + secrets.token_urlsafe(12)
HEATMAP_DONE = "document.querySelectorAll('[data-testid=heatmap-host]').length === {n}"
CAPACITY_DONE = "document.querySelector('[data-testid=capacity-table][data-ready=true]') !== null"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _operator():
    """A staff operator with a password and a confirmed authenticator (what `manage.py createsuperuser` and
    `POST /me/totp/` + confirm leave); returns its TOTP device."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    from apps.identity.models import User

    user = User.objects.filter(email=EMAIL).first() or User.objects.create_user(EMAIL, staff_role="operator")
    user.set_password(PASSWORD)
    user.save()
    return TOTPDevice.objects.get_or_create(user=user, name="default", defaults={"confirmed": True})[0]


def _code(device) -> str:
    from django_otp.oath import totp

    return str(totp(device.bin_key, step=device.step, t0=device.t0, digits=device.digits)).zfill(device.digits)


def _gunicorn(port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpucloud.settings"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "--config", "deploy/gunicorn.conf.py",
                             "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "2",
                             "--threads", "4", "--timeout", "120"], cwd=ROOT, env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    import requests

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=15).status_code == 200:
                return proc
        except requests.RequestException:   # not listening yet, or still importing
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"gunicorn did not start; its log: {log.read_text()[-2000:]}")


def _sign_in(context, base: str, device) -> None:
    """The console's sign-in, through the browser context's own requests (its cookie jar)."""
    r = context.request.get(f"{base}/api/v1/session/")
    assert r.ok, r.text()
    csrf = {c["name"]: c["value"] for c in context.cookies()}["csrftoken"]
    r = context.request.post(f"{base}/api/v1/session/", headers={"X-CSRFToken": csrf},
                             data={"email": EMAIL, "password": PASSWORD, "otp_token": _code(device)})
    assert r.ok, r.text()
    state = r.json()
    if state.get("second_factor_needed"):
        csrf = {c["name"]: c["value"] for c in context.cookies()}["csrftoken"]
        r = context.request.post(f"{base}/api/v1/session/otp/", headers={"X-CSRFToken": csrf},
                                 data={"otp_token": _code(device)})
        assert r.ok and not r.json().get("second_factor_needed"), r.text()


def _measure(context, url: str, done_js: str, runs: int) -> tuple[list[float], list[int]]:
    """`runs` navigations to `url`, each in a new tab: seconds from navigation start to the first frame where
    `done_js` holds, and the API requests made until then."""
    times, counts = [], []
    for _ in range(runs):
        page = context.new_page()
        api: list[str] = []
        page.on("request", lambda req, api=api: api.append(req.url) if "/api/" in req.url else None)
        page.goto(url, wait_until="commit")
        ms = page.wait_for_function(f"() => ({done_js}) ? performance.now() : false", polling="raf",
                                    timeout=60_000).json_value()
        counts.append(len(api))
        if os.environ.get("BENCH_VERBOSE"):   # what the time went on: each resource's start and end, in ms
            entries = page.evaluate("performance.getEntriesByType('resource').map(e => "
                                    "[e.name.replace(location.origin, ''), Math.round(e.startTime), "
                                    "Math.round(e.responseEnd), e.encodedBodySize])")
            print(f"{ms:.0f} ms; resources: {entries}", file=sys.stderr)
        times.append(ms / 1000)
        page.close()
    return times, counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--fill", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="keep the bench database of an earlier run if it has "
                                                         "the same number of hosts (skips building the fleet)")
    args = ap.parse_args()
    if not (ROOT / "frontend" / "dist" / "index.html").is_file():
        raise SystemExit("the console is not built: run `make console` first")
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no chromium at {CHROMIUM} (set CHROMIUM_PATH)")
    rng = random.Random(args.seed)
    fleetbench.setup_django(reuse=args.reuse)
    from apps.inventory.models import Host

    if not (args.reuse and Host.objects.count() == args.hosts):
        fleet_summary.build_fleet(args.hosts, args.fill, rng)
    device = _operator()
    from django.db import connections

    connections.close_all()

    from apps.inventory.models import Gpu

    hosts = Host.objects.exclude(state="retired").count()
    gpus = Gpu.objects.exclude(host__state="retired").count()
    connections.close_all()
    load_before = os.getloadavg()[0]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = ROOT / "var" / "bench_admin_portal_web.log"
    log.parent.mkdir(exist_ok=True)
    web = _gunicorn(port, log)
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                         "--disable-dev-shm-usage"])
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            _sign_in(context, base, device)
            # one warm-up of each screen: the browser's cache holds the console's scripts, gunicorn's workers
            # have imported everything, as for an operator who has the console open every day
            _measure(context, f"{base}/staff/fleet", HEATMAP_DONE.format(n=hosts), 1)
            _measure(context, f"{base}/staff/capacity", CAPACITY_DONE, 1)
            heat, heat_req = _measure(context, f"{base}/staff/fleet", HEATMAP_DONE.format(n=hosts), args.runs)
            cap, cap_req = _measure(context, f"{base}/staff/capacity", CAPACITY_DONE, args.runs)
            browser.close()
    finally:
        web.terminate()
        web.wait(30)
    res = {"heatmap_p50_s": round(statistics.median(heat), 3), "heatmap_max_s": round(max(heat), 3),
           "heatmap_requests": max(heat_req), "capacity_p50_s": round(statistics.median(cap), 3),
           "capacity_max_s": round(max(cap), 3), "capacity_requests": max(cap_req), "hosts": hosts, "gpus": gpus,
           "runs": args.runs, "load_1m_before": round(load_before, 2), "load_1m_after": round(os.getloadavg()[0], 2)}
    print(f"heat map of {hosts} hosts / {gpus} GPUs: p50 {res['heatmap_p50_s']} s, max {res['heatmap_max_s']} s, "
          f"{res['heatmap_requests']} API requests; capacity: p50 {res['capacity_p50_s']} s, "
          f"max {res['capacity_max_s']} s, {res['capacity_requests']} API requests")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
