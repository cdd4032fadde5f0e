"""The provider's acceptance tests run with the end-to-end suite only (`pytest -m e2e`, `make e2e`); a plain
`pytest` skips them (they start the whole stack). A failed step skips the later ones, which need its objects."""
import pytest


def _selected(config) -> bool:
    expr = (config.getoption("markexpr") or "").replace(" ", "")
    return "e2e" in expr and "note2e" not in expr


def pytest_collection_modifyitems(config, items):
    if _selected(config):
        return
    skip = pytest.mark.skip(reason="Terraform acceptance test: run it with `pytest -m e2e` (make e2e)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and "e2e" in item.keywords:
        item.module.__dict__.setdefault("_FAILED_STEPS", []).append(item.name)
    return report
