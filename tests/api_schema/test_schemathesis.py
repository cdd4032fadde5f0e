"""Property-based check of the API against its committed OpenAPI schema (Schemathesis), in process (WSGI).

Every operation of `docs/openapi/v1.yaml` gets generated requests, sent as an organization owner (tenant token)
and as a provider operator (staff token). Each answer must be no server error (5xx), have a status the schema
documents for the operation, the content type it documents and a body its schema accepts.

Bounded to stay within a few minutes on two cores: `SCHEMATHESIS_MAX_EXAMPLES` examples per operation (default 2).
Selected explicitly, as the end-to-end journey: `pytest -m api_schema` (`make api-schema`).
"""
import os
from pathlib import Path

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import make_org, make_project, make_user, member, token_for

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs/openapi/v1.yaml"
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "2"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

schema = schemathesis.openapi.from_path(SCHEMA_PATH)
schema.app = get_wsgi_application()

pytestmark = pytest.mark.api_schema


@pytest.fixture
def tokens(db):
    """An organization owner's and a provider operator's tokens; the WSGI app keeps the test's connection open
    (as Django's test client does, the request signals do not close it)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    org = make_org("fuzz")
    make_project(org, "fuzz-main")
    owner = make_user("owner@fuzz.test")
    member(owner, org, OrgRole.OWNER)
    staff = make_user("operator@fuzz.test", staff_role=StaffRole.OPERATOR)
    yield {"tenant": token_for(owner, organization=org), "staff": token_for(staff, staff=True)}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_api_answers_as_its_schema_says(case, tokens):
    for token in tokens.values():
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
