import pytest

from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import make_org, make_project, make_user, member, token_for

from .framework import World


@pytest.fixture(autouse=True)
def baremetal_fake_driver(settings):
    """The matrix checks who may call the bare-metal endpoints, not Ironic: they run on the in-process `fake`
    driver (an Ironic that is not running would answer every accepted call 503 `baremetal_unavailable`)."""
    from apps.baremetal.services.driver import forget_driver

    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}),
                        "baremetal": "apps.baremetal.drivers.fake:FakeBaremetalDriver"}
    forget_driver()
    yield
    forget_driver()


@pytest.fixture
def world(db) -> World:
    org_a, org_b = make_org("alpha"), make_org("beta")
    project_a, project_b = make_project(org_a, "alpha-main"), make_project(org_b, "beta-main")
    users = {role: make_user(f"{role}@alpha.test") for role in ("owner", "admin", "member", "viewer")}
    for role, user in users.items():
        member(user, org_a, role)
    users["other_owner"] = make_user("owner@beta.test")
    member(users["other_owner"], org_b, OrgRole.OWNER)
    users["staff"] = make_user("operator@provider.test", staff_role=StaffRole.OPERATOR)
    tokens = {
        "anonymous": None,
        "other_org": token_for(users["other_owner"], organization=org_b),
        "viewer": token_for(users["viewer"], organization=org_a),
        "member": token_for(users["member"], organization=org_a),
        "admin": token_for(users["admin"], organization=org_a),
        "read_token": token_for(users["owner"], organization=org_a, scope="read"),
        "staff": token_for(users["staff"], staff=True),
    }
    return World(org_a=org_a, project_a=project_a, org_b=org_b, project_b=project_b, users=users, tokens=tokens)
