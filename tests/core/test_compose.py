"""docker-compose.yml stays valid without a Docker engine: it parses, names the services, and its environment
uses exactly the variables the settings module reads."""
from pathlib import Path

import environ
import yaml
from django.conf import settings

from gpucloud import celery as celery_module

COMPOSE = Path(settings.BASE_DIR) / "docker-compose.yml"


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_names_the_services():
    assert set(_compose()["services"]) == {"postgres", "redis", "web", "worker", "beat"}


def test_compose_environment_matches_settings():
    services = _compose()["services"]
    settings_src = (Path(settings.BASE_DIR) / "gpucloud" / "settings.py").read_text()
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        for key in env:
            assert f'"{key}"' in settings_src, f"{name}: settings.py does not read {key}"
        db = environ.Env.db_url_config(env["DATABASE_URL"])
        pg = services["postgres"]["environment"]
        assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"]) == (
            pg["POSTGRES_DB"], pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], "postgres")
        assert env["REDIS_URL"].startswith("redis://redis:6379/")
    worker_queues = services["worker"]["command"][services["worker"]["command"].index("-Q") + 1].split(",")
    assert sorted(worker_queues) == sorted(q.name for q in celery_module.app.conf.task_queues)
