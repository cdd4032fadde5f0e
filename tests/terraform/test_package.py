"""The provider package without the stack: its docs pages are what the declarations say, and the example estate
is valid Terraform against the provider's schema (init from the filesystem mirror, `terraform validate`)."""
import shutil
import subprocess

import pytest

from .workspace import ESTATE, TF_DIR, Workspace, require_provider

pytestmark = pytest.mark.slow


def test_docs_pages_match_the_declarations():
    require_provider()
    r = subprocess.run([str(TF_DIR / ".venv/bin/python"), str(TF_DIR / "gendocs.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_example_estate_validates_against_the_provider_schema():
    require_provider()
    ws = Workspace({}, "validate")
    try:
        shutil.copy(ESTATE, ws.dir / "main.tf")
        ws.ok("init", "-backend=false", "-no-color")
        r = ws.ok("validate", "-no-color")
        assert "Success! The configuration is valid." in r.out, r.out
    finally:
        ws.cleanup()
