"""The schema check is selected explicitly: `pytest -m api_schema` (or `make api-schema`); a plain `pytest` /
`make test` run skips it, so the unit suite stays fast under `-n 2`."""
import pytest


def pytest_collection_modifyitems(config, items):
    expr = (config.getoption("markexpr") or "").replace(" ", "")
    if "api_schema" in expr and "notapi_schema" not in expr:
        return
    skip = pytest.mark.skip(reason="schema check: run it with `pytest -m api_schema` (make api-schema)")
    for item in items:
        if "api_schema" in item.keywords:
            item.add_marker(skip)
