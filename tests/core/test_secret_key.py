"""The server refuses to start with a public or weak SECRET_KEY when DEBUG is false (it signs sessions and the
invitation and sign-up links: with the public default anyone could forge them)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from apps.core.secret_key import DEVELOPMENT_SECRET_KEY, secret_key_from

ROOT = Path(settings.BASE_DIR)
GOOD = "k3y-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


def _start(**env) -> subprocess.CompletedProcess:
    """Load the settings in a fresh process the way gunicorn does (gpucloud.wsgi), with `env` on top."""
    full = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    full.update(DJANGO_SETTINGS_MODULE="gpucloud.settings", PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", "import gpucloud.wsgi"], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("key", [None, "", DEVELOPMENT_SECRET_KEY, "change-me", "django-insecure-" + "x1y2z3" * 10,
                                 "ab" * 40])
def test_the_web_server_refuses_to_start_without_a_real_key(key):
    r = _start(DEBUG="false", **({} if key is None else {"SECRET_KEY": key}))
    assert r.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY must be set to a long random value when DEBUG is false" in r.stderr


def test_the_web_server_starts_with_a_real_key_or_in_debug():
    assert _start(DEBUG="false", SECRET_KEY=GOOD).returncode == 0
    assert _start(DEBUG="true").returncode == 0


def test_the_rule():
    assert secret_key_from(GOOD, debug=False) == GOOD
    assert secret_key_from("", debug=True) == DEVELOPMENT_SECRET_KEY
    with pytest.raises(ImproperlyConfigured, match="public development default"):
        secret_key_from(DEVELOPMENT_SECRET_KEY, debug=False)
    with pytest.raises(ImproperlyConfigured, match="not set"):
        secret_key_from("", debug=False)


def test_this_run_uses_a_real_key():
    assert settings.SECRET_KEY != DEVELOPMENT_SECRET_KEY and len(settings.SECRET_KEY) >= 50
