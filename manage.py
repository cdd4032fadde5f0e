#!/usr/bin/env python
"""Django's command-line utility for gpucloud.

In a checkout, a command run without `SECRET_KEY` in the environment uses the checkout's own key in
`var/secret_key` (generated once, as `make run` does: scripts/secret-key.sh), so `manage.py create_api_token`
and the like work beside `make run`. The servers (gunicorn, Celery) never read that file: they need
`SECRET_KEY` set (apps/core/secret_key.py)."""
import os
import secrets
import sys
from pathlib import Path


def _checkout_secret_key() -> str:
    path = Path(__file__).resolve().parent / "var" / "secret_key"
    if not path.is_file() or not path.read_text().strip():
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(secrets.token_urlsafe(50) + "\n")
        tmp.replace(path)
    return path.read_text().strip()


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    if not os.environ.get("SECRET_KEY"):
        os.environ["SECRET_KEY"] = _checkout_secret_key()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
