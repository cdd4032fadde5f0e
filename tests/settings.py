"""Settings for the test run: the project's settings with a random `SECRET_KEY` for this run (settings refuse to
start without one when DEBUG is false, apps/core/secret_key.py), unless the environment gives one.

Processes the tests start (gunicorn, Celery, manage.py) inherit the key through the environment and load the
project's own settings module."""
import os
import secrets

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

from gpucloud.settings import *  # noqa: E402,F401,F403

# child processes use the real settings module (with the inherited key), as a deployment does
os.environ["DJANGO_SETTINGS_MODULE"] = "gpucloud.settings"
