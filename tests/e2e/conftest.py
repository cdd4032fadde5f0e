"""The end-to-end journey: selected with `pytest -m e2e` (or `make e2e`); the root conftest skips it in a plain
run and records failed steps, so later steps skip."""
