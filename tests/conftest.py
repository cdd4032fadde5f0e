"""Shared fixtures: API clients; Celery runs tasks eagerly in-process unless a test starts a real worker."""
import pytest
from rest_framework.test import APIClient

from gpucloud.celery import app as celery_app


@pytest.fixture(autouse=True, scope="session")
def _celery_eager():
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield


@pytest.fixture(autouse=True, scope="session")
def _redis_database_per_worker():
    """Each pytest-xdist worker gets its own Redis database (gw0 the configured one, gwK that one + K), for the
    cache, Celery's broker (when it is REDIS_URL) and the processes its tests start: some tests empty the cache (`cache.clear()` is FLUSHDB), which
    must not wipe the counters of a test running on the other worker (a sign-in throttle test saw its window
    emptied between attempts)."""
    import os

    from django.conf import settings
    from django.test import override_settings

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base, _, db = settings.REDIS_URL.rpartition("/")
    if not index or not db.isdigit():
        yield
        return
    url = f"{base}/{int(db) + index}"
    moved = {"REDIS_URL": url}
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):  # they default to REDIS_URL: they move with it
        if getattr(settings, name) == settings.REDIS_URL:
            moved[name] = url
    os.environ.update(moved)  # the processes a test starts use the same databases as the test
    celery_app.conf.broker_url = moved.get("CELERY_BROKER_URL", celery_app.conf.broker_url)
    celery_app.conf.result_backend = moved.get("CELERY_RESULT_BACKEND", celery_app.conf.result_backend)
    caches = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": url}}
    with override_settings(CACHES=caches, **moved):
        yield


@pytest.fixture(autouse=True, scope="session")
def _flush_passes_the_audit_truncate_refusal():
    """The audit tables refuse TRUNCATE (migration audit 0004). Django's flush between transactional tests
    truncates every table, so the test database's owner lifts the refusal for the flush statement only, as an
    operator would (ALTER TABLE ... DISABLE TRIGGER needs the table's owner); the application never can."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.sql_flush
    triggers = (("audit_auditevent", "audit_event_no_truncate"), ("audit_auditchainlink", "audit_chain_no_truncate"))

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        sql = original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        present = [(t, trg) for t, trg in triggers if t in tables]
        if not sql or not present:
            return sql
        return ([f"ALTER TABLE {t} DISABLE TRIGGER {trg};" for t, trg in present] + sql
                + [f"ALTER TABLE {t} ENABLE TRIGGER {trg};" for t, trg in present])

    DatabaseOperations.sql_flush = sql_flush
    yield
    DatabaseOperations.sql_flush = original


@pytest.fixture(autouse=True)
def _celery_joins_allowed():
    """Celery's "a task must not wait for a result" flag is one process-wide boolean that eager tasks set and
    restore around themselves; two threads running eager tasks at once (the concurrency tests) can restore it in
    the wrong order and leave it set, and a later test on that worker that really waits for a result (the
    console log) was refused. Each test starts with joins allowed, as a web process is."""
    from celery.result import allow_join_result

    with allow_join_result():
        yield


@pytest.fixture(autouse=True)
def _fresh_topology_cache():
    """Placement caches the leaf/spine view per process for PLACEMENT_TOPOLOGY_TTL_S; each test builds its own
    hosts, so a view cached by an earlier test on this worker must not hide them (every create meets the
    placement rule of ADR 0404, in every app's tests)."""
    from apps.scheduling.placement.topology import topology_cache_clear

    topology_cache_clear()
    yield
    topology_cache_clear()


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _sign_in_throttle_loose(settings):
    """Suites sign in often from one address; tests of the throttle itself set `SIGN_IN_THROTTLE_RATES` low."""
    settings.SIGN_IN_THROTTLE_RATES = {"sign_in_account_address": "100000/min", "sign_in_account": "100000/min",
                                       "sign_in_address": "100000/min"}


@pytest.fixture(autouse=True)
def dns(monkeypatch) -> dict:
    """Tests never ask a DNS server: outbound (webhook) host names resolve only through this table, which a test
    may fill (`dns["hooks.example"] = ["203.0.113.7"]`); any other name does not resolve."""
    table: dict[str, list[str]] = {}
    monkeypatch.setattr("apps.core.outbound.resolve", lambda host, port: list(table.get(host, [])))
    return table


def _e2e_selected(config) -> bool:
    expr = (config.getoption("markexpr") or "").replace(" ", "")
    return "e2e" in expr and "note2e" not in expr


def pytest_collection_modifyitems(config, items):
    """Tests marked `e2e` (the API journey, the console's browser tests, the Terraform provider's acceptance tests)
    start the whole stack: they run only when selected (`pytest -m e2e`, `make e2e`); a plain run skips them, so
    the unit suite stays fast under `-n 2`."""
    if _e2e_selected(config):
        return
    skip = pytest.mark.skip(reason="end-to-end test (starts the whole stack): run it with `pytest -m e2e` (make e2e)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed end-to-end step in its module (`_FAILED_STEPS`), so the later steps, which need its
    objects, skip instead of failing."""
    report = yield
    if report.failed and "e2e" in item.keywords:
        steps = item.module.__dict__.setdefault("_FAILED_STEPS", [])
        if item.name not in steps:
            steps.append(item.name)
    return report
