"""The settings each production layout gives its processes come out as meant: gpucloud/settings.py is loaded in a
fresh interpreter with exactly the environment that deploy/compose.yml (with the image's `ENV`) or the systemd
units (with gpucloud.env.example and their credentials) give a process, and the resulting settings are compared
with the rest of the layout: the services the URLs name, the TLS proxy in front, the secrets read from files."""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
DEPLOY = ROOT / "deploy"
PUBLIC_HOST = "cloud.example.com"
KEY = secrets.token_urlsafe(50)
PROBE = """
import json
import gpucloud.settings as s
db = s.DATABASES["default"]
print(json.dumps({
    "db": [db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]],
    "secret_key": s.SECRET_KEY, "debug": s.DEBUG, "allowed_hosts": s.ALLOWED_HOSTS, "public_url": s.PUBLIC_URL,
    "redis": s.REDIS_URL, "broker": s.CELERY_BROKER_URL, "results": s.CELERY_RESULT_BACKEND,
    "proxy_ssl_header": list(getattr(s, "SECURE_PROXY_SSL_HEADER", None) or []),
    "secure_cookies": [getattr(s, "SESSION_COOKIE_SECURE", False), getattr(s, "CSRF_COOKIE_SECURE", False)],
    "console_dist": str(s.CONSOLE_DIST_DIR),
}))
"""


def _load_settings(env: dict[str, str], cwd: Path = ROOT) -> dict:
    """The probe's view of gpucloud.settings under `env` alone (plus PATH and PYTHONPATH)."""
    full = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([sys.executable, "-c", PROBE], env=full, cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _interpolate(value: str, shell: dict[str, str]) -> str:
    """Compose's `${NAME}`, `${NAME:-default}`, `${NAME:?message}` with the operator's shell variables."""
    def sub(m):
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if shell.get(name):
            return shell[name]
        assert op != ":?", f"compose refuses to start without {name}: {arg}"
        return arg if op == ":-" else ""
    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", sub, value)


def _compose_env(tmp_path: Path, shell: dict[str, str]) -> tuple[dict, dict[str, str]]:
    doc = yaml.safe_load((DEPLOY / "compose.yml").read_text())
    image_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(
        line[4:] for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line.startswith("ENV "))))
    secrets = {"secret_key": KEY, "database_url": "postgres://gpucloud:pw@postgres:5432/gpucloud"}
    env = dict(image_env)
    for key, value in doc["x-app"]["environment"].items():
        value = _interpolate(str(value), shell)
        if value.startswith("/run/secrets/"):
            name = value.removeprefix("/run/secrets/")
            assert name in doc["x-app"]["secrets"], f"{key}: secret {name} not mounted"
            (tmp_path / name).write_text(secrets[name] + "\n")
            value = str(tmp_path / name)
        env[key] = value
    return doc, env


def test_compose_processes_get_the_settings_the_layout_needs(tmp_path):
    doc, env = _compose_env(tmp_path, {"PUBLIC_HOST": PUBLIC_HOST})
    s = _load_settings(env)
    services = doc["services"]
    pg = services["postgres"]["environment"]
    assert s["secret_key"] == KEY and s["debug"] is False
    assert s["db"][:2] == [pg["POSTGRES_DB"], pg["POSTGRES_USER"]] and s["db"][3] == "postgres"
    for url in (s["redis"], s["broker"], s["results"]):
        assert url.startswith("redis://redis:6379/") and "redis" in services
    assert s["allowed_hosts"] == [PUBLIC_HOST] and s["public_url"] == f"https://{PUBLIC_HOST}"
    # nginx terminates TLS in front of web and says so in X-Forwarded-Proto: the settings must trust it, or
    # every request looks like plain HTTP (CSRF refuses the console's https Origin, cookies are not secure)
    site = (DEPLOY / "nginx" / "gpucloud.conf").read_text()
    assert "nginx" in services and "proxy_set_header X-Forwarded-Proto https;" in site
    assert s["proxy_ssl_header"] == ["HTTP_X_FORWARDED_PROTO", "https"] and s["secure_cookies"] == [True, True]
    assert s["console_dist"] == "/app/frontend/dist"
    # web alone sums its gunicorn workers' metrics through files (apps/core/metrics.py), with every app variable
    web_env = services["web"]["environment"]
    assert {k: web_env[k] for k in doc["x-app"]["environment"]} == doc["x-app"]["environment"]
    assert web_env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    assert all("PROMETHEUS_MULTIPROC_DIR" not in (services[n].get("environment") or {})
               for n in ("worker", "notify", "beat", "migrate"))


def test_compose_rabbitmq_profile_gives_the_workers_rabbitmq(tmp_path):
    doc, env = _compose_env(tmp_path, {"PUBLIC_HOST": PUBLIC_HOST, "RABBITMQ_PASSWORD": "pw",
                                       "CELERY_BROKER_URL": "amqp://gpucloud:pw@rabbitmq:5672//"})
    s = _load_settings(env)
    rabbit = urlsplit(s["broker"])
    service = doc["services"]["rabbitmq"]
    assert (rabbit.username, rabbit.hostname, rabbit.port) == (
        service["environment"]["RABBITMQ_DEFAULT_USER"], "rabbitmq", 5672)
    assert s["redis"].startswith("redis://redis:6379/")   # Redis stays for the cache, results and agents' batch


def _unit_env(unit: str, creds: Path) -> dict[str, str]:
    env = {}
    for line in (DEPLOY / "systemd" / "gpucloud.env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    text = (DEPLOY / "systemd" / unit).read_text()
    for line in re.findall(r"^Environment=(.*)$", text, re.M):
        for pair in line.split():
            key, _, value = pair.partition("=")
            env[key] = value.replace("%d", str(creds))
    for name, path in re.findall(r"^LoadCredential=(\w+):(\S+)$", text, re.M):
        assert path == f"/etc/gpucloud/credentials/{name}"
    return env


def test_systemd_units_get_the_settings_the_layout_needs(tmp_path):
    (tmp_path / "secret_key").write_text(KEY + "\n")
    (tmp_path / "database_url").write_text("postgres://gpucloud:pw@db.internal:5432/gpucloud\n")
    settings_src = (ROOT / "gpucloud" / "settings.py").read_text()
    for unit in ("gpucloud-web.service", "gpucloud-worker@.service", "gpucloud-notify.service",
                 "gpucloud-beat.service"):
        env = _unit_env(unit, tmp_path)
        for key in env:
            assert f'"{key.removesuffix("_FILE")}"' in settings_src, f"{unit}: settings.py does not read {key}"
        s = _load_settings(env)
        assert s["secret_key"] == KEY and s["debug"] is False, unit
        assert s["db"] == ["gpucloud", "gpucloud", "pw", "db.internal", 5432], unit
        assert s["public_url"] == f"https://{s['allowed_hosts'][0]}", unit
        assert s["proxy_ssl_header"] == ["HTTP_X_FORWARDED_PROTO", "https"], unit   # behind deploy/nginx
        workdir = re.search(r"^WorkingDirectory=(\S+)$", (DEPLOY / "systemd" / unit).read_text(), re.M).group(1)
        assert s["console_dist"] == f"{workdir}/frontend/dist", unit
        runtime = re.search(r"^RuntimeDirectory=(\S+)$", (DEPLOY / "systemd" / unit).read_text(), re.M)
        if unit == "gpucloud-web.service":   # its gunicorn workers' metric files, in its own runtime directory
            assert env["PROMETHEUS_MULTIPROC_DIR"].startswith(f"/run/{runtime.group(1)}/")
        else:
            assert "PROMETHEUS_MULTIPROC_DIR" not in env, unit


def test_shutdown_grace_matches_between_compose_and_systemd():
    """SIGTERM is a warm shutdown for a worker (running steps finish; tests/operations/test_worker_kill.py) and a
    graceful one for gunicorn (requests in flight finish within `graceful_timeout`): the SIGKILL that follows must
    come later, in compose as in systemd."""
    services = yaml.safe_load((DEPLOY / "compose.yml").read_text())["services"]

    def seconds(value: str) -> int:
        m = re.fullmatch(r"(\d+)s", value)
        assert m, value
        return int(m.group(1))

    for name, unit in (("worker", "gpucloud-worker@.service"), ("notify", "gpucloud-notify.service")):
        stop = re.search(r"^TimeoutStopSec=(\d+)$", (DEPLOY / "systemd" / unit).read_text(), re.M)
        assert stop and seconds(services[name]["stop_grace_period"]) == int(stop.group(1)), name
    conf = (DEPLOY / "gunicorn.conf.py").read_text()
    m = re.search(r"^graceful_timeout = (\d+)", conf, re.M)
    graceful = int(m.group(1)) if m else 30   # gunicorn's default
    assert seconds(services["web"]["stop_grace_period"]) > graceful
    web_unit = (DEPLOY / "systemd" / "gpucloud-web.service").read_text()
    m = re.search(r"^TimeoutStopSec=(\d+)$", web_unit, re.M)
    assert (int(m.group(1)) if m else 90) > graceful   # systemd's default DefaultTimeoutStopSec is 90 s
