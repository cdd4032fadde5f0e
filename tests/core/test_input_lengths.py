"""A string longer than its column is a 400 `validation_error` naming the field, never a 500, and nothing is written.

The cases come from a new user's walkthrough (an invitation to a 262-character e-mail answered 500:
StringDataRightTruncation on the varchar(254)) and an audit of the plain input serializers whose strings are stored
in a bounded column: every e-mail the API takes (the default length of `apps.core.serializers`), the full name of
an account made by accepting an invitation, the agent's version on enrolment.
"""
import pytest
from rest_framework.test import APIClient

from apps.core.serializers import EMAIL_MAX_LENGTH
from apps.identity.models import StaffRole, User
from apps.inventory.models import AgentCredential, Host, Region, Zone
from apps.inventory.services.agent import enrollment_token_create
from apps.tenancy.models import Invitation, Membership, Organization
from apps.tenancy.services.invitations import invitation_token

pytestmark = pytest.mark.django_db
LONG_EMAIL = "x" * 252 + "@acme.test"  # 262 characters, a valid address
assert len(LONG_EMAIL) == 262 > EMAIL_MAX_LENGTH


def _written() -> tuple:
    return (Invitation.objects.count(), Membership.objects.count(), Organization.objects.count(),
            User.objects.count(), AgentCredential.objects.count(),
            sorted(Organization.objects.values_list("billing_email", flat=True)))


def _cases(world):
    org = str(world.org_b.pk)
    return {
        "invitation email": (world.client_b, "post", "/api/v1/invitations/",
                             {"organization": org, "email": LONG_EMAIL, "role": "viewer"}, "email"),
        "membership user_email (an invitation)": (world.client_b, "post", "/api/v1/memberships/",
                                                  {"organization": org, "user_email": LONG_EMAIL, "role": "viewer"},
                                                  "user_email"),
        "organization owner_email": (world.staff_client, "post", "/api/v1/organizations/",
                                     {"slug": "long-mail", "name": "Long", "owner_email": LONG_EMAIL}, "owner_email"),
        "organization billing_email": (world.staff_client, "post", "/api/v1/organizations/",
                                       {"slug": "long-mail", "name": "Long", "owner_email": "o@acme.test",
                                        "billing_email": LONG_EMAIL}, "billing_email"),
        "organization update billing_email": (world.client_b, "patch", f"/api/v1/organizations/{org}/",
                                              {"billing_email": LONG_EMAIL}, "billing_email"),
        "sign-up email": (APIClient(), "post", "/api/v1/signup/", {"email": LONG_EMAIL}, "email"),
    }


CASES = ["invitation email", "membership user_email (an invitation)", "organization owner_email",
         "organization billing_email", "organization update billing_email", "sign-up email"]


def _refused(response, field):
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "validation_error", body
    assert list(body["errors"]) == [field], body


@pytest.mark.parametrize("case", CASES)
def test_an_email_longer_than_its_column_is_400_naming_the_field(world, settings, case):
    settings.SIGNUP_ENABLED = True
    client, method, path, body, field = _cases(world)[case]
    before = _written()
    _refused(getattr(client, method)(path, body, format="json"), field)
    assert _written() == before


def test_an_email_of_254_characters_is_still_invited(world):
    email = "x" * (EMAIL_MAX_LENGTH - len("@acme.test")) + "@acme.test"
    r = world.client_b.post("/api/v1/invitations/", {"organization": str(world.org_b.pk), "email": email,
                                                     "role": "viewer"}, format="json")
    assert r.status_code == 201, r.content
    assert Invitation.objects.get().email == email


def test_an_invitation_full_name_longer_than_the_users_is_400(world):
    r = world.client_b.post("/api/v1/invitations/", {"organization": str(world.org_b.pk), "email": "n@acme.test",
                                                     "role": "viewer"}, format="json")
    assert r.status_code == 201, r.content
    token = invitation_token(Invitation.objects.get())
    before = _written()
    r = APIClient().post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42",
                                                         "full_name": "N" * 201}, format="json")
    _refused(r, "full_name")
    assert _written() == before


def test_an_agent_version_longer_than_the_hosts_is_400(db):
    staff = User.objects.create_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    host = Host.objects.create(name="hgx-01", zone=Zone.objects.create(name="z1", region=Region.objects.create(
        name="r1")), serial="SER-1", numa_nodes=2)
    _, token = enrollment_token_create(actor=staff, host=host)
    before = _written()
    r = APIClient().post("/api/v1/agent/enroll", {"token": token, "inventory": {}, "agent_version": "1" * 33},
                         format="json")
    _refused(r, "agent_version")
    assert _written() == before
