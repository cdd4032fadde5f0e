"""Every route the URL resolver serves, with every method it answers, is an operation of the committed schema,
and the other way round: no undocumented endpoint or verb (found when `OPTIONS /api/v1/me/totp/recovery-codes/`
advertised DELETE, which the schema did not list, because the viewset had a method named `delete`).

The paths come from drf-spectacular's endpoint enumerator (the same walk that writes the schema); the methods
are the ones DRF itself dispatches: a viewset route's action map plus any handler the class defines under an HTTP
verb's name (`APIView.dispatch` calls `getattr(view, method)`), a plain view's verb methods.
"""
from pathlib import Path

import yaml
from django.conf import settings
from drf_spectacular.generators import EndpointEnumerator

SCHEMA = Path(settings.BASE_DIR) / "docs" / "openapi" / "v1.yaml"
VERBS = {"get", "post", "put", "patch", "delete"}


def _dispatched(callback) -> set[str]:
    cls = callback.cls
    methods = {m for m in VERBS if callable(getattr(cls, m, None))}
    methods |= set(getattr(callback, "actions", None) or {}) & VERBS
    return methods


def test_every_route_and_method_is_in_the_schema_and_back():
    documented = {(path, method) for path, ops in yaml.safe_load(SCHEMA.read_text())["paths"].items()
                  for method in ops if method in VERBS}
    served = set()
    for path, _pattern, _method, callback in EndpointEnumerator().get_api_endpoints():
        if not path.startswith("/api/v1/") or callback.cls.__module__.startswith("drf_spectacular."):  # the schema
            continue
        served |= {(path.replace("{pk}", "{id}"), m) for m in _dispatched(callback)}  # SCHEMA_COERCE_PATH_PK
    assert sorted(served - documented) == []
    assert sorted(documented - served) == []
