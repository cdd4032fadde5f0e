"""Authorization matrix over every /api/v1/ endpoint (see framework.py for roles, entries and checks)."""
import json

import pytest
import redis
from django.conf import settings
from django.db import connection

from apps.audit.models import AuditEvent
from tests.tenancy.helpers import client_for

from .framework import ROLES, Case, api_endpoints, collect_entries

ENTRIES = collect_entries()


def test_every_endpoint_has_an_entry():
    served = api_endpoints()
    covered = {entry.key for entry in ENTRIES}
    missing = sorted(served - covered)
    stale = sorted(covered - served)
    assert not missing, "endpoints without an authorization-matrix entry (add them to tests/authz/matrix_<app>.py):\n" \
        + "\n".join(f"  {m} {p}" for m, p in missing)
    assert not stale, f"entries for endpoints that do not exist: {stale}"


def test_entries_are_unique_and_complete():
    keys = [entry.key for entry in ENTRIES]
    assert len(keys) == len(set(keys)), "duplicate entries"
    for entry in ENTRIES:
        assert set(entry.expect) == set(ROLES), f"{entry}: expect must name every role {ROLES}"


def _row_counts() -> dict[str, int]:
    tables = [t for t in connection.introspection.table_names() if not t.startswith("django_")]
    sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM \"{t}\"" for t in tables)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return dict(cursor.fetchall())


def _queued() -> int:
    """Messages waiting in the Celery broker's queues (the real Redis broker of this test run)."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return sum(client.llen(queue) for queue in settings.CELERY_QUEUES)


def _url(entry, case: Case) -> str:
    return entry.path.format(**case.kwargs) + "/"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("entry", ENTRIES, ids=str)
def test_matrix(entry, role, world, django_capture_on_commit_callbacks):
    case = entry.setup(world) if entry.setup else Case()
    client = client_for(world.tokens[role])
    before = _row_counts()
    audits_before = AuditEvent.objects.count()
    queued_before = _queued()
    with django_capture_on_commit_callbacks() as callbacks:
        response = getattr(client, entry.method.lower())(_url(entry, case), data=case.data if entry.method != "GET"
                                                         else case.query, format="json" if case.data else None)
    expected = entry.expect[role]
    body = response.content.decode(errors="replace")
    assert response.status_code == expected, f"{entry} as {role}: {response.status_code} {body[:400]}"
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["code"], body
        after = _row_counts()
        # every change refused with 403 to a signed-in caller is audited (`api.request.refused`, or the refusal's
        # own event); some entries audit other refusals too
        refused_change = (response.status_code == 403 and role != "anonymous" and entry.method != "GET"
                          and not entry.path.endswith("/check"))      # a check is a dry run: it changes nothing
        if entry.audits_refusal(role) or refused_change:
            assert AuditEvent.objects.count() > audits_before, f"{entry} as {role}: the refusal was not audited"
            after, before = ({t: n for t, n in counts.items() if not t.startswith("audit_")}
                             for counts in (after, before))
        assert after == before, f"{entry} as {role} was denied but changed rows"
        assert callbacks == [], f"{entry} as {role} was denied but scheduled work"
        assert _queued() == queued_before, f"{entry} as {role} was denied but enqueued a task"
    elif entry.method != "GET" and entry.audited:
        assert AuditEvent.objects.count() > audits_before, f"{entry} as {role} wrote no audit event"
    if role == "other_org":
        if response.status_code >= 400:  # the problem's `instance` echoes the request path: not a leak
            body = json.dumps({k: v for k, v in response.json().items() if k != "instance"})
        own = [] if entry.public else [str(v) for v in case.kwargs.values()]
        leaked = [ident for ident in world.a_identifiers() + own if ident in body]
        assert not leaked, f"{entry}: organization A identifiers visible to another tenant: {leaked}"


DENIED = (401, 403, 404)


STAFF_ONLY = [e for e in ENTRIES if e.method != "GET" and 200 <= e.expect["staff"] < 300
              and all(e.expect[r] in DENIED for r in ("viewer", "member", "admin", "read_token"))]


@pytest.mark.parametrize("entry", STAFF_ONLY, ids=str)
def test_permission_is_checked_before_the_body(entry, world):
    """On a staff endpoint a tenant gets the same denial whatever the body: an invalid one (a member no
    serializer defines, a wrong type for every member the valid body has) never reveals the body's rules."""
    case = entry.setup(world) if entry.setup else Case()
    invalid = {"not_a_field": object.__name__}
    invalid.update({k: {"wrong": "type"} for k in (case.data or {})})
    for role in ROLES:
        if entry.expect[role] not in DENIED:
            continue
        response = getattr(client_for(world.tokens[role]), entry.method.lower())(_url(entry, case), data=invalid,
                                                                                 format="json")
        assert response.status_code == entry.expect[role], \
            f"{entry} as {role} with an invalid body: {response.status_code} {response.content[:300]}"
