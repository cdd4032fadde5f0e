"""The import contracts in `.importlinter` hold: apps/core imports no domain app, drivers import no models,
services, selectors, api or other app, the agent imports nothing of apps/, scheduling does not import compute,
inventory does not import scheduling (nor any product app), inside every app api -> services -> selectors ->
models, models import nothing above them, the foundation apps import no product app, billing imports none of the
apps it rates. `make test` fails as soon as
an import crosses one of these lines (the same check as `make lint-imports`)."""
import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
CONTRACTS = {
    "apps.core imports no domain app",
    "drivers import only apps.core (no models, services, selectors or api of any app)",
    "the agent imports nothing of apps",
    "scheduling does not import compute",
    "inventory does not import scheduling",
    "api -> services/selectors -> models inside each app",
    "models import no services, selectors, api, tasks or workflows of any app",
    "tenancy, identity, audit and operations import no product app",
    "billing imports no app whose usage it rates (usage comes through its registry)",
    "inventory imports no product app",
}


def _lint() -> subprocess.CompletedProcess:
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "COLUMNS": "400"}  # one line per contract, whatever the terminal
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)


def test_import_contracts_are_kept():
    run = _lint()
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    kept = {name.strip() for name in re.findall(r"^(.+?)\s*KEPT\s*$", out, flags=re.MULTILINE)}
    assert CONTRACTS <= kept, out
