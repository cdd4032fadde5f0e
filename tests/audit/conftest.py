"""Audit tests that need tenants use compute's world (two organizations, a staff operator, fake driver)."""
from tests.compute.conftest import fake_driver, world  # noqa: F401  (fixtures)
