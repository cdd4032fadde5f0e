from tests.billing.conftest import tiers  # noqa: F401  (fixture)
from tests.compute.conftest import fake_driver, world  # noqa: F401  (fixtures)
