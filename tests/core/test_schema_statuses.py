"""The committed schema declares what the code answers. Derived from the code, not listed by hand, so a new
endpoint cannot drift:

- every operation whose view method can raise (directly or through the services it calls) a 409, 410 or 422
  `DomainError` declares that status (tests/core/raises.py reads the source); an explicitly described response
  names every such code;
- a DELETE or an action without a body declares 409 only where the code can answer it (body operations carry the
  shared 409 for taken names and references);
- every operation a DRF throttle counts declares 429 with `Retry-After`, and no other does;
- a PATCH body requires what its input serializer requires (inputs are validated whole, not partially).
"""
from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from apps.core.schema import throttles_for
from tests.core.raises import statuses

CHECKED = {409, 410, 422}
#: Where the static reading over-approximates, with the reason; each entry must still be derived (a stale one fails).
NOT_ANSWERED = {
    # dry runs: a refusal of the placement rule or a quota is reported in the 200 body (`check_answer`)
    ("post", "/api/v1/instances/check/"): {422},
    ("post", "/api/v1/clusters/check/"): {422},
    ("post", "/api/v1/leases/check/"): {422},
    # approving a move: a placement refusal while starting the re-create is caught and leaves the remediation
    # waiting, its reason saying why (apps.health.services.remediation._start)
    ("post", "/api/v1/remediations/{id}/approve/"): {422},
}


@pytest.fixture(scope="module")
def schema():
    generator = SchemaGenerator()
    doc = generator.get_schema(request=None, public=True)
    generator._initialise_endpoints()
    operations = []
    for path, _regex, method, view in generator._get_paths_and_endpoints():
        if path in doc["paths"]:
            action = getattr(view, "action", None) or method.lower()
            operations.append((path, method.lower(), view, action, doc["paths"][path][method.lower()]))
    assert len(operations) > 150
    return doc, operations


def _description(doc, response: dict) -> str:
    if "$ref" in response:
        return doc["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]["description"]
    return response.get("description", "")


def test_the_analysis_finds_the_errors_it_should():
    from apps.networking.api.views import VpcViewSet
    from apps.tenancy.api.views import InvitationViewSet, ProjectViewSet

    assert "in_use" in statuses(VpcViewSet, "destroy")[409]
    assert "project_not_empty" in statuses(ProjectViewSet, "destroy")[409]
    assert {"invitation_expired", "invitation_revoked"} <= statuses(InvitationViewSet, "accept")[410]
    assert 409 not in statuses(VpcViewSet, "retrieve")


def test_every_status_the_code_can_answer_is_declared(schema):
    doc, operations = schema
    missing, unnamed, exempted = [], [], set()
    for path, method, view, action, op in operations:
        for status, codes in statuses(type(view), action).items():
            if status not in CHECKED:
                continue
            if status in NOT_ANSWERED.get((method, path), ()):
                exempted.add((method, path))
                continue
            response = op["responses"].get(str(status))
            if response is None:
                missing.append(f"{method.upper()} {path} {status} {sorted(c for c in codes if c)}")
                continue
            described = _description(doc, response)
            if "$ref" not in response:
                unnamed += [f"{method.upper()} {path} {status} {code}" for code in codes
                            if code and code not in described]
            assert response.get("content", {}).get("application/problem+json") or "$ref" in response, (path, status)
    assert not missing, "undeclared statuses:\n" + "\n".join(missing)
    assert exempted == set(NOT_ANSWERED), "stale NOT_ANSWERED entries"
    assert not unnamed, "codes missing from the declared description:\n" + "\n".join(unnamed)


def test_a_409_without_a_body_is_declared_only_where_the_code_raises_it(schema):
    _doc, operations = schema
    spurious = [f"{method.upper()} {path}" for path, method, view, action, op in operations
                if "requestBody" not in op and "409" in op["responses"] and 409 not in statuses(type(view), action)]
    assert not spurious
    deletes = {path for path, method, _v, _a, op in operations if method == "delete" and "409" in op["responses"]}
    assert {"/api/v1/vpcs/{id}/", "/api/v1/subnets/{id}/", "/api/v1/security-groups/{id}/",
            "/api/v1/ssh-keys/{id}/", "/api/v1/projects/{id}/", "/api/v1/memberships/{id}/"} <= deletes


def test_throttled_operations_declare_429_with_retry_after(schema):
    doc, operations = schema
    throttled = set()
    for path, method, view, _action, op in operations:
        if throttles_for(view, method):
            throttled.add(f"{method.upper()} {path}")
            assert op["responses"].get("429") == {"$ref": "#/components/responses/Problem429"}, path
        else:
            assert "429" not in op["responses"], (method, path)
    assert {"POST /api/v1/session/", "POST /api/v1/session/otp/", "POST /api/v1/me/totp/confirm/",
            "POST /api/v1/me/totp/recovery-codes/"} <= throttled
    assert "GET /api/v1/session/" not in throttled  # the sign-in throttles count POSTs only
    shared = doc["components"]["responses"]["Problem429"]
    assert shared["headers"]["Retry-After"]["schema"]["type"] == "integer"
    assert shared["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}


def test_a_patch_body_requires_what_its_serializer_requires(schema):
    doc, _operations = schema
    generator = SchemaGenerator()
    generator._initialise_endpoints()
    checked = 0
    for path, _regex, method, view in generator._get_paths_and_endpoints():
        if method != "PATCH" or path not in doc["paths"]:
            continue
        view.schema.method, view.schema.path = method, path
        serializer = view.schema.get_request_serializer()
        fields = serializer().fields if isinstance(serializer, type) else serializer.fields
        required = {name for name, f in fields.items() if f.required and not f.read_only}
        body = doc["paths"][path]["patch"]["requestBody"]
        ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert set(doc["components"]["schemas"][ref].get("required", [])) == required, path
        assert body.get("required", False) == bool(required), path
        checked += 1
    assert checked >= 10
