"""Browser tests of the web console: Playwright (pytest-playwright) in Debian's chromium against the real stack
(`tests/e2e/stack.py`, the API journey's: PostgreSQL, Redis db 11, gunicorn serving the console built by
`make console`, Celery worker and beat, OVN, OpenSM, agents, the sample fleet), started for this module and
stopped after it, like the journey's and the Terraform provider's (one stack at a time owns Redis db 11).

Selected like the API journey: `pytest -m e2e` (`make e2e`); a plain run skips them. Screenshots of each screen go
to docs/console/; each screen is checked with axe-core (from the console's npm dependencies) for serious and
critical violations."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.stack import ROOT, Stack

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/lib/chromium/chromium")
AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "console"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; scripts/system-packages.sh)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                     "--disable-component-update", "--disable-default-apps", "--disable-extensions",
                     "--disable-sync", "--no-first-run", "--mute-audio"]}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 800}, "locale": "en-US",
            "timezone_id": "UTC", "reduced_motion": "reduce"}


@pytest.fixture(scope="module")
def console_stack(request):
    """A fresh stack for the module, after checking that its gunicorn serves the built console (not the 503
    `console_not_built`); its logs are kept when a step failed."""
    import requests

    index = ROOT / "frontend" / "dist" / "index.html"
    assert index.is_file(), "the console is not built: run `make console` (make e2e does)"
    stack = Stack().start()
    try:
        r = requests.get(f"{stack.base}/instances", timeout=30)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html"), (r.status_code, r.text[:300])
        yield stack
    finally:
        stack.stop(keep_logs=bool(request.module.__dict__.get("_FAILED_STEPS")))


def _axe_serious(page) -> list:
    # colours half-way through a transition are not what the person sees: measure once nothing moves (two frames
    # first, so a transition about to start has started; spinners loop forever and are left out)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.wait_for_function("document.getAnimations().every(a => a.playState !== 'running'"
                           " || a.effect.getTiming().iterations === Infinity)")
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a',
            'wcag21aa', 'best-practice']}, resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
    }""")
    return [v for v in result if v["impact"] in ("serious", "critical")]


def check_a11y(page, screen: str) -> None:
    """axe-core on the page as it is now: no serious or critical violation (WCAG 2 A/AA rules)."""
    assert AXE.is_file(), f"{AXE} missing: run `npm ci` in frontend/"
    page.add_script_tag(path=str(AXE))
    bad = _axe_serious(page)
    if bad:  # a dialog's fade may not have started when it is first in the page: measure the settled screen
        page.wait_for_timeout(1000)
        bad = _axe_serious(page)
    assert not bad, f"{screen}: accessibility violations:\n{json.dumps(bad, indent=1)}"


def shot(page, name: str, mask=()) -> Path:
    """A screenshot of the screen for docs/console/ (committed; docs/console.md shows them). `mask`: locators drawn
    over as solid boxes (a token secret is never committed, even a dead test stack's)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    # from the top: a page scrolled down (a click near its foot) is drawn with the fixed header at the scroll
    # position, over the page's heading
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=True, mask=list(mask))
    return path

