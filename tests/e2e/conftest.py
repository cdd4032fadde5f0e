"""The end-to-end journey is selected explicitly: `pytest -m e2e` (or `make e2e`). A plain `pytest` / `make test`
run skips it (it starts the whole stack, ~5 minutes), so the unit suite stays fast under `-n 2`."""
import pytest


def _selected(config) -> bool:
    expr = (config.getoption("markexpr") or "").replace(" ", "")
    return "e2e" in expr and "note2e" not in expr


def pytest_collection_modifyitems(config, items):
    if _selected(config):
        return
    skip = pytest.mark.skip(reason="end-to-end journey: run it with `pytest -m e2e` (make e2e)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed journey step, so the later steps (which need its objects) skip instead of failing."""
    report = yield
    if report.failed and "e2e" in item.keywords:
        item.module.__dict__.setdefault("_FAILED_STEPS", []).append(item.name)
    return report
