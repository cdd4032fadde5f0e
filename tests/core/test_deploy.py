"""deploy/ stays consistent without Docker or systemd: the production compose file, the systemd units, the nginx
site and the image's Dockerfile name the same processes and commands as `make run` (scripts/run.sh) and the
settings, take configuration only from the environment and secrets only from files."""

import re
import shlex
from pathlib import Path

import yaml
from django.conf import settings

from gpucloud import celery as celery_module

ROOT = Path(settings.BASE_DIR)
DEPLOY = ROOT / "deploy"
SETTINGS_SRC = (ROOT / "gpucloud" / "settings.py").read_text()
GUNICORN = ["gunicorn", "--config", "deploy/gunicorn.conf.py", "gpucloud.wsgi:application"]
ALL_QUEUES = sorted(q.name for q in celery_module.app.conf.task_queues)


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yml").read_text())


def _unit(name: str) -> dict[str, list[str]]:
    """A systemd unit file as {Section.Key: [values]} (keys may repeat, e.g. LoadCredential)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in (ROOT / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key}", []).append(value)
    return out


def _exec(unit: dict) -> list[str]:
    [cmd] = unit["Service.ExecStart"]
    argv = shlex.split(cmd)
    return [Path(argv[0]).name, *argv[1:]]


def _queues(argv: list[str]) -> list[str]:
    return argv[argv.index("-Q") + 1].split(",")


def _run_sh_commands() -> list[list[str]]:
    """The celery and gunicorn command lines `make run` starts (scripts/run.sh, continuation lines joined)."""
    text = (ROOT / "scripts" / "run.sh").read_text().replace("\\\n", " ")
    cmds = []
    for line in text.splitlines():
        m = re.search(r"\.venv/bin/(celery|gunicorn) ([^&>]*)", line)
        if m:
            cmds.append([m.group(1), *shlex.split(m.group(2))])
    return cmds


def test_make_run_still_uses_scripts_run_sh():
    assert re.search(r"^run:.*\n\t@scripts/run\.sh$", (ROOT / "Makefile").read_text(), re.M)


def test_compose_production_processes():
    services = _compose()["services"]
    assert set(services) == {
        "postgres",
        "redis",
        "rabbitmq",
        "migrate",
        "web",
        "worker",
        "notify",
        "beat",
        "nginx",
    }
    assert services["web"]["deploy"]["replicas"] == 2 and services["worker"]["deploy"]["replicas"] == 2
    assert "deploy" not in services["beat"]  # one beat; a second would only stand by (ADR 1100)
    assert services["rabbitmq"]["profiles"] == ["rabbitmq"]  # the alternative broker, off unless asked for
    assert services["web"]["command"][:4] == GUNICORN
    assert services["beat"]["command"][:4] == ["celery", "-A", "gpucloud", "beat"]
    assert (
        sorted(_queues(services["worker"]["command"]) + _queues(services["notify"]["command"])) == ALL_QUEUES
    )
    assert services["nginx"]["depends_on"]["web"]["condition"] == "service_healthy"


def test_compose_configuration_is_environment_and_secret_files_only():
    doc = _compose()
    env = doc["x-app"]["environment"]
    for key in env:
        name = key.removesuffix("_FILE")
        assert f'"{name}"' in SETTINGS_SRC, f"settings.py does not read {name}"
    assert env["SECRET_KEY_FILE"].startswith("/run/secrets/") and env["DATABASE_URL_FILE"].startswith(
        "/run/secrets/"
    )
    assert "SECRET_KEY" not in env and "DATABASE_URL" not in env
    declared = set(doc["secrets"])
    for name, service in doc["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if re.search(
                r"PASS|SECRET", key
            ):  # from a secret file or the operator's environment, never literal
                assert str(value).startswith(("${", "/run/secrets/")), f"{name}: {key} is a literal secret"
        for ref in service.get("secrets") or []:
            assert (ref["source"] if isinstance(ref, dict) else ref) in declared
    assert all(s["file"].startswith("./secrets/") for s in doc["secrets"].values())
    gitignore = (ROOT / ".gitignore").read_text()
    assert "deploy/secrets/" in gitignore


def test_systemd_units_match_make_run():
    run_sh = _run_sh_commands()
    run_gunicorn = next(c for c in run_sh if c[0] == "gunicorn")
    run_workers = [c for c in run_sh if c[:4] == ["celery", "-A", "gpucloud", "worker"]]
    web, worker, notify, beat = (
        _unit(f"deploy/systemd/gpucloud-{n}.service") for n in ("web", "worker@", "notify", "beat")
    )
    assert _exec(web)[:4] == run_gunicorn[:4] == GUNICORN
    assert [_queues(_exec(worker)), _queues(_exec(notify))] == [_queues(c) for c in run_workers]
    assert _exec(beat)[:4] == ["celery", "-A", "gpucloud", "beat"]
    for unit in (web, worker, notify, beat):
        assert unit["Service.EnvironmentFile"] == ["/etc/gpucloud/gpucloud.env"]
        creds = {c.split(":")[0] for c in unit["Service.LoadCredential"]}
        assert creds == {"secret_key", "database_url"}
        assert "SECRET_KEY_FILE=%d/secret_key" in unit["Service.Environment"][0]
        assert unit["Service.Restart"] == ["always"] and unit["Install.WantedBy"] == ["multi-user.target"]
    agent = _unit("agent/gpucloud-agent.service")
    assert _exec(agent)[:2] == ["gpucloud-agent", "run"]
    for line in (DEPLOY / "systemd" / "gpucloud.env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            key = line.split("=", 1)[0]
            assert f'"{key}"' in SETTINGS_SRC, f"gpucloud.env.example: settings.py does not read {key}"
            assert not re.search(r"SECRET|PASSWORD", key)


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_gunicorn_control_socket_is_per_service():
    """gunicorn's control socket defaults to one path under the user's home, shared by every gunicorn of the
    user: `make run` keeps it in the checkout's var/run/, the systemd unit in its runtime directory, the
    containers at the same per-service path."""
    run_gunicorn = next(c for c in _run_sh_commands() if c[0] == "gunicorn")
    assert _option(run_gunicorn, "--control-socket") == "var/run/web.ctl"
    assert "mkdir -p var/log var/run" in (ROOT / "scripts" / "run.sh").read_text()
    web = _unit("deploy/systemd/gpucloud-web.service")
    assert web["Service.RuntimeDirectory"] == ["gpucloud-web"]
    assert _option(_exec(web), "--control-socket") == "/run/gpucloud-web/gunicorn.ctl"
    compose_web = _compose()["services"]["web"]["command"]
    assert _option(compose_web, "--control-socket") == "/run/gpucloud-web/gunicorn.ctl"
    cmd = re.search(r"^CMD (\[.*\])$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert yaml.safe_load(cmd.group(1)) == compose_web


def test_nginx_site_terminates_tls_for_the_web_processes():
    site = (DEPLOY / "nginx" / "gpucloud.conf").read_text()
    assert "listen 443 ssl;" in site and "return 301 https://" in site
    assert "proxy_set_header X-Forwarded-Proto https;" in site
    assert "server ${GPUCLOUD_UPSTREAM};" in site
    nginx = _compose()["services"]["nginx"]
    targets = {s["target"] for s in nginx["secrets"]}
    for path in re.findall(r"ssl_certificate(?:_key)? (\S+);", site):
        assert path in targets
    assert nginx["environment"]["GPUCLOUD_UPSTREAM"] == "web:8000"
    # the settings trust X-Forwarded-Proto only when told they run behind it
    assert 'SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")' in SETTINGS_SRC


def test_dockerfile_builds_the_console_into_the_image():
    text = (DEPLOY / "Dockerfile").read_text()
    console_stage = text.split("FROM python:")[0]
    assert re.search(r"^FROM node:\d+\S* AS console$", console_stage, re.M)
    assert "npm ci" in console_stage and "RUN npm run build" in console_stage
    assert "COPY docs/openapi/v1.yaml" in console_stage  # the build generates the API types from the schema
    m = re.search(r"^COPY --from=console /src/frontend/dist (\S+)$", text, re.M)
    assert m, "the image does not copy the built console"
    assert re.search(rf"CONSOLE_DIST_DIR={re.escape(m.group(1))}\b", text)
    cmd = yaml.safe_load(re.search(r"^CMD (.+)$", text, re.M).group(1))
    assert cmd[:4] == GUNICORN
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "**/node_modules" in ignored and "frontend/dist" in ignored
