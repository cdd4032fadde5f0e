"""The provider's acceptance tests run with the end-to-end suite only (`pytest -m e2e`, `make e2e`): the root
conftest skips them in a plain run and records a failed step, so the later ones, which need its objects, skip."""
