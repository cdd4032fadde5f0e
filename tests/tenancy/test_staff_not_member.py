"""Provider staff act on the provider's side, not inside a customer's organization (docs/adr/0104): a billing admin
or operator with no membership cannot invite an owner into an organization that has one, change its members or
add an SSH key to its projects (403 `staff_not_member`, nothing written); both still onboard a new organization's
first owner; support writes nothing; a staff account that is also a member acts there by its membership."""
import pytest

from apps.audit.models import AuditEvent
from apps.compute.models import SshKey
from apps.identity.models import StaffRole
from apps.tenancy.models import Invitation, Membership, Organization, OrgRole

from .helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc staff@example"
WRITING = (StaffRole.BILLING_ADMIN, StaffRole.OPERATOR)


@pytest.fixture
def customer():
    org = make_org("customer")
    member(make_user("owner@customer.test"), org, OrgRole.OWNER)
    return org, make_project(org, "prod")


def _staff(role, email=None):
    user = make_user(email or f"{role}@provider.test", staff_role=role)
    return user, client_for(token_for(user, staff=True))


def _counts():
    """What a refused request must leave as it was (its refusal is audited: `api.request.refused`)."""
    return Invitation.objects.count(), Membership.objects.count(), SshKey.objects.count()


def _refused(r, code="staff_not_member", organization=None):
    assert r.status_code == 403, r.content
    assert r["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == code
    # a staff role's refusal is filed in the staff audit log (unscoped), a member's in its organization
    event = AuditEvent.objects.filter(action="api.request.refused").latest("id")
    assert (event.organization_id, event.after["code"]) == (getattr(organization, "pk", None), code)


@pytest.mark.parametrize("role", WRITING)
def test_writing_staff_cannot_invite_an_owner_into_an_organization_with_one(customer, role):
    org, _ = customer
    _, client = _staff(role)
    before = _counts()
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "intruder@example.com",
                                                  "role": "owner"}))
    _refused(client.post("/api/v1/memberships/", {"organization": str(org.pk), "user_email": "intruder@example.com",
                                                  "role": "owner"}))
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "intruder@example.com",
                                                  "role": "viewer"}))
    owner = Membership.objects.get(organization=org, role=OrgRole.OWNER)
    _refused(client.patch(f"/api/v1/memberships/{owner.pk}/", {"role": "viewer"}))
    _refused(client.delete(f"/api/v1/memberships/{owner.pk}/"))
    assert _counts() == before


@pytest.mark.parametrize("role", WRITING)
def test_writing_staff_cannot_add_an_ssh_key_to_a_customer_project(customer, role):
    _, project = customer
    _, client = _staff(role)
    before = _counts()
    _refused(client.post("/api/v1/ssh-keys/", {"project": str(project.pk), "name": "backdoor",
                                               "public_key": ED25519}))
    assert _counts() == before


@pytest.mark.parametrize("role", WRITING)
def test_writing_staff_onboard_a_new_organizations_first_owner(role):
    _, client = _staff(role)
    r = client.post("/api/v1/organizations/", {"slug": "newco", "name": "NewCo", "owner_email": "ceo@newco.test"})
    assert r.status_code == 201, r.content
    org = Organization.objects.get(slug="newco")
    first = Invitation.objects.get(organization=org, role=OrgRole.OWNER)
    # a mistyped owner e-mail: revoke and invite again while nobody owns the organization
    assert client.delete(f"/api/v1/invitations/{first.pk}/").status_code == 204
    r = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "cto@newco.test", "role": "owner"})
    assert r.status_code == 201, r.content
    # but only the owner: no other role, no member of the organization by staff status
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "dev@newco.test",
                                                  "role": "admin"}))
    # once an owner accepted, onboarding is over
    member(make_user("cto@newco.test"), org, OrgRole.OWNER)
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "second@newco.test",
                                                  "role": "owner"}))


def test_an_inactive_owner_does_not_end_onboarding():
    org = make_org("dormant")
    gone = make_user("gone@dormant.test")
    member(gone, org, OrgRole.OWNER)
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    _, client = _staff(StaffRole.BILLING_ADMIN)
    r = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@dormant.test",
                                             "role": "owner"})
    assert r.status_code == 201, r.content


def test_support_writes_nothing_not_even_onboarding(customer):
    org, project = customer
    _, client = _staff(StaffRole.SUPPORT)
    before = _counts()
    r = client.post("/api/v1/organizations/", {"slug": "newco", "name": "NewCo", "owner_email": "ceo@newco.test"})
    _refused(r, "permission_denied")
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "x@example.com",
                                                  "role": "owner"}))
    _refused(client.post("/api/v1/ssh-keys/", {"project": str(project.pk), "name": "k", "public_key": ED25519}))
    assert _counts() == before
    empty = make_org("empty")
    r = client.post("/api/v1/invitations/", {"organization": str(empty.pk), "email": "x@example.com",
                                             "role": "owner"})
    _refused(r)
    # the support reads stay
    assert client.get(f"/api/v1/organizations/{org.pk}/").status_code == 200
    assert client.get(f"/api/v1/memberships/?organization={org.pk}").status_code == 200


@pytest.mark.parametrize("role", WRITING)
def test_staff_who_are_members_act_by_their_membership(customer, role):
    org, project = customer
    user, client = _staff(role)
    member(user, org, OrgRole.ADMIN)
    r = client.post("/api/v1/ssh-keys/", {"project": str(project.pk), "name": "mine", "public_key": ED25519})
    assert r.status_code == 201, r.content
    r = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "dev@customer.test",
                                             "role": "member"})
    assert r.status_code == 201, r.content
    # an admin, not an owner: the owner role is the owners' to give, staff or not
    _refused(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "boss@customer.test",
                                                  "role": "owner"}), "owner_required", org)
    body = client.get(f"/api/v1/organizations/{org.pk}/").json()
    assert (body["role"], body["can_manage_members"]) == ("admin", True)


@pytest.mark.parametrize("role", WRITING)
def test_the_console_flags_answer_staff_by_membership(customer, role):
    org, project = customer
    _, client = _staff(role)
    body = client.get(f"/api/v1/organizations/{org.pk}/").json()
    assert (body["role"], body["can_manage_members"]) == (None, False)
    body = client.get(f"/api/v1/projects/{project.pk}/").json()
    assert (body["role"], body["can_write"], body["can_manage_members"]) == (None, False, False)
