"""Benchmark: the web console in a real browser (Playwright in Debian's chromium) against gunicorn serving the
built console and the API on PostgreSQL, with `--instances` (default 1,000) instances in the signed-in project.

Usage: python bench/console.py [--instances 1000] [--loads 10] [--checks 10] [--reuse]

Needs the console built (`make console`, i.e. `cd frontend && npm run build`). Builds a benchmark-only database
(`gpucloud_bench_console`, dropped and re-created each run unless `--reuse`) with the project's migrations, loads
the sample fleet (apps/inventory/fleets/sample.yaml, its MIG host's GPUs in MIG mode), the tests' MIG and 8-GPU
flavors, an image, an on-demand price for the MIG flavor, an organization with quotas large enough for the
instances, and its owner who signs in with a password; the instances are bulk-inserted `active` rows (setup
only: what is measured is reading them). Then it starts gunicorn (2 workers × 4 threads, `DEBUG` off, as
`make run`) and, signed in through the sign-in screen:

- `instances_first_page_p50_s`: `--loads` navigations to `/instances` (a full page load each, the browser's
  cache warm as for someone who used the console before): seconds from the navigation's start until the first
  page's rows (20) are in the table; p50 (and max);
- `placeable_answer_p50_ms`: `--checks` times on a freshly loaded launch wizard: milliseconds from choosing the
  8-GPU flavor until the "can it be placed" answer is on the screen (the flavor step's check; a placement over the
  whole sample fleet, the quota lines over the 1,000 instances and the price); p50 (and max). (The MIG flavor
  needs the agents' SR-IOV VFs, which this bench has no agents to report);
- `initial_js_gzip_kb`: the JavaScript the console's `index.html` loads before any screen (its entry script and
  module preloads), each file gzip-compressed (level 9) as a server would send it; the screens' own chunks load
  on first visit and are not counted (`initial_js_files` lists what is).

The last stdout line is one JSON object with those keys, the 1-minute load average and the numbers of loads.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = os.environ.get("BENCH_DATABASE_NAME", "gpucloud_bench_console")
PG = os.environ.get("BENCH_PG", "postgres://127.0.0.1:5432")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
os.environ["DATABASE_URL"] = f"{PG}/{BENCH_DB}"
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))   # DEBUG off (as `make run`) needs one
os.environ["DEBUG"] = "false"
DIST = ROOT / "frontend" / "dist"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/lib/chromium/chromium")
EMAIL, PASSWORD = "owner@bench.example", "correct horse battery staple"
MIG_HOST = "a-su2-n32"


def initial_js() -> tuple[float, list[str]]:
    """kB (gzip -9) of the scripts index.html loads before any screen, and their names."""
    html = (DIST / "index.html").read_text()
    paths = re.findall(r'<script[^>]+src="([^"]+\.js)"', html) + re.findall(
        r'<link[^>]+rel="modulepreload"[^>]+href="([^"]+\.js)"', html)
    total = sum(len(gzip.compress((DIST / p.lstrip("/")).read_bytes(), compresslevel=9)) for p in dict.fromkeys(paths))
    return round(total / 1000, 1), sorted(set(paths))


def seed(n_instances: int, reuse: bool) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import placement_latency as base  # the bench database helpers (DATABASE_URL was set above)

    base.create_database(reuse)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from decimal import Decimal

    from apps.billing.services.catalog import price_book_create, price_set
    from apps.compute.models import Flavor, Image, Instance
    from apps.core.clock import now
    from apps.identity.models import User
    from apps.inventory.models import Gpu, Host
    from apps.inventory.services.fleet import fleet_import
    from apps.tenancy.models import Membership, Organization, Project, Quota
    from tests.console.world import IMAGE, MIG_FLAVOR, WHOLE_FLAVOR

    if Organization.objects.filter(slug="bench").exists():
        return
    if not Host.objects.exists():
        fleet_import(actor=None, document=(ROOT / "apps/inventory/fleets/sample.yaml").read_text(), dry_run=False)
    Gpu.objects.filter(host__name=MIG_HOST).update(mode="mig")
    mig = Flavor.objects.create(**MIG_FLAVOR)
    Flavor.objects.create(**WHOLE_FLAVOR)
    image = Image.objects.create(**IMAGE, is_active=True)
    book = price_book_create(actor=None, name="list", currency="USD", effective_from=now().replace(year=2020))
    for tier in ("standard", "premium"):
        for name, price in ((mig.name, "0.99"), (WHOLE_FLAVOR["name"], "19.92")):
            price_set(actor=None, book=book, sku=f"flavor:name={name}", sla_tier=tier, pricing_model="on_demand",
                      unit_price=Decimal(price))
    org = Organization.objects.create(slug="bench", name="Bench", legal_name="Bench Inc.", currency="USD",
                                      billing_timezone="UTC", plan="enterprise")
    project = Project.objects.create(organization=org, slug="research", name="Research")
    user = User.objects.create_user(EMAIL, password=PASSWORD, full_name="Bench Owner")
    Membership.objects.create(user=user, organization=org, role="owner")
    for resource, limit in (("instances", 100_000), ("vcpus", 10_000_000), ("memory_mib", 10**12),
                            ("gpus", 100_000), ("mig_slices", 100_000)):
        Quota.objects.update_or_create(organization=org, project=None, resource=resource, defaults={"limit": limit})
    Instance.objects.bulk_create([Instance(project=project, name=f"vm-{i:04d}", flavor=mig, image=image,
                                           status="active", observed_state="running", launched_at=now())
                                  for i in range(n_instances)], batch_size=1000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_web(port: int) -> subprocess.Popen:
    env = {**os.environ, "PUBLIC_URL": f"http://127.0.0.1:{port}", "LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "--config", "deploy/gunicorn.conf.py",
                             "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "2",
                             "--threads", "4", "--timeout", "120"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "gunicorn exited"
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not answer /healthz within 60 s")


def measure(base: str, loads: int, checks: int) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions", "--no-first-run"])
        page = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US").new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/sign-in")
        page.get_by_label("E-mail").fill(EMAIL)
        page.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Dashboard").wait_for()

        rows = page.get_by_role("table", name="Instances").locator("tbody tr")
        first_page = []
        for _ in range(loads + 1):          # the first load warms the browser's cache and the server's
            t0 = time.perf_counter()
            page.goto(f"{base}/instances", wait_until="commit")
            rows.nth(19).wait_for()
            first_page.append(time.perf_counter() - t0)
            assert rows.count() == 20, rows.count()
        first_page = first_page[1:]

        answers = []
        answer = page.get_by_test_id("flavor-check").get_by_test_id("placement-check")
        for _ in range(checks + 1):
            # the wizard keeps its choices in the tab's sessionStorage: forget them, so each load starts with no
            # flavor chosen and the answer is timed from the choice (not from a check the restored choice started)
            page.evaluate("window.sessionStorage.clear()")
            page.goto(f"{base}/instances/new")
            radio = page.get_by_label(re.compile(r"^h100-8x"))
            radio.wait_for()
            t0 = time.perf_counter()
            radio.check()
            answer.wait_for()
            answers.append((time.perf_counter() - t0) * 1000)
            text = answer.inner_text()
            assert "can be placed now" in text.lower(), text
        answers = answers[1:]
        browser.close()
    return {"first_page": first_page, "answers": answers}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--checks", type=int, default=10)
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    if not (DIST / "index.html").is_file():
        raise SystemExit("the console is not built: run `make console` (cd frontend && npm run build)")
    js_kb, js_files = initial_js()
    seed(args.instances, args.reuse)
    port = free_port()
    web = start_web(port)
    try:
        m = measure(f"http://127.0.0.1:{port}", args.loads, args.checks)
    finally:
        os.killpg(web.pid, 15)
        web.wait(timeout=30)
    fp, ans = m["first_page"], m["answers"]
    print(f"instances page, first page of {args.instances}: " + ", ".join(f"{x:.3f}" for x in fp) + " s")
    print("placeable answer after choosing a flavor: " + ", ".join(f"{x:.0f}" for x in ans) + " ms")
    print(f"initial JavaScript: {js_kb} kB gzip ({', '.join(js_files)})")
    print(json.dumps({
        "instances": args.instances,
        "instances_first_page_p50_s": round(statistics.median(fp), 3),
        "instances_first_page_max_s": round(max(fp), 3),
        "placeable_answer_p50_ms": round(statistics.median(ans), 1),
        "placeable_answer_max_ms": round(max(ans), 1),
        "initial_js_gzip_kb": js_kb,
        "initial_js_files": js_files,
        "loads": len(fp), "checks": len(ans),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
