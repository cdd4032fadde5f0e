"""List endpoints run a bounded number of queries: the count does not grow with the rows listed."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.services import audit_record
from apps.tenancy.models import OrgRole

from .helpers import client_for, make_org, make_project, make_user, member, token_for


def _queries(client, path) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/projects/", "/api/v1/memberships/", "/api/v1/audit-events/",
                                  "/api/v1/organizations/", "/api/v1/tokens/", "/api/v1/invitations/",
                                  "/api/v1/service-accounts/"])
def test_list_query_count_is_independent_of_rows(path):
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=org))
    client.get(path)  # warm: last_used_at is written on first use

    made = iter(range(1000))

    def grow(n):
        for _ in range(n):
            i = next(made)
            project = make_project(org, f"p{i}")
            member(make_user(f"u{i}@acme.test"), org, "member", project=project)
            audit_record(actor=owner, action="test.event", target=project)

    grow(2)
    small = _queries(client, path)
    grow(20)
    assert _queries(client, path) == small
