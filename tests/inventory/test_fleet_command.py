"""`manage.py fleet` import/export, and the demo loader."""
import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.inventory.demo import load_demo
from apps.inventory.models import Gpu, Host

pytestmark = pytest.mark.django_db
SAMPLE = Path(__file__).resolve().parents[2] / "apps/inventory/fleets/sample.yaml"


def run(*args):
    out = io.StringIO()
    call_command("fleet", *args, stdout=out, stderr=out)
    return out.getvalue()


def test_dry_run_prints_diff_and_writes_nothing():
    out = run("import", str(SAMPLE), "--dry-run")
    assert "+ host a-su1-n01" in out and "Dry run: nothing written." in out
    assert Host.objects.count() == 0


def test_import_yes_then_reimport_is_no_change(tmp_path):
    assert "Applied" in run("import", str(SAMPLE), "--yes")
    assert Gpu.objects.count() == 624
    assert run("import", str(SAMPLE), "--yes").strip() == "No changes."
    exported = tmp_path / "fleet.yaml"
    run("export", "-o", str(exported))
    assert run("import", str(exported), "--dry-run").strip() == "No changes."


def test_without_yes_and_no_terminal_nothing_is_applied():
    out = run("import", str(SAMPLE))
    assert "pass --yes" in out and Host.objects.count() == 0


def test_invalid_file_names_lines_and_fails(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SAMPLE.read_text().replace("model: H200-SXM-141GB", "model: H200-NOPE"))
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("fleet", "import", str(bad), "--yes", stdout=err, stderr=err)
    assert f"{bad}: line 128: gpu b-h200-n01/0: unknown GPU model 'H200-NOPE'" in err.getvalue()
    assert Host.objects.count() == 0


def test_demo_loader_is_idempotent():
    out = io.StringIO()
    load_demo(out)
    load_demo(out)
    assert "already loaded" in out.getvalue()
    assert Host.objects.count() == 82
