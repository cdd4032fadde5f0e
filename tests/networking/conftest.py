import pytest

from .helpers import Tenant


@pytest.fixture
def tenant_a(db) -> Tenant:
    return Tenant("alpha")


@pytest.fixture
def tenant_b(db) -> Tenant:
    return Tenant("beta")
