"""Projects and organizations say what the caller may do there (`role`, `can_write`), so the console shows a
viewer's write actions disabled from the server's answer instead of guessing."""
import pytest
from django.test import Client

from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole, ProjectRole
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for


@pytest.fixture
def acme(db):
    org = make_org("acme")
    return org, make_project(org, "train")


def _project(client, project):
    body = client.get(f"/api/v1/projects/{project.pk}/").json()
    return body["role"], body["can_write"]


@pytest.mark.parametrize("org_role,expected", [
    (OrgRole.OWNER, ("admin", True)), (OrgRole.ADMIN, ("admin", True)), (OrgRole.MEMBER, ("member", True)),
    (OrgRole.BILLING, ("viewer", False)), (OrgRole.VIEWER, ("viewer", False)),
])
def test_project_role_and_can_write_follow_the_organization_role(acme, org_role, expected):
    org, project = acme
    user = make_user(f"{org_role}@acme.test")
    member(user, org, org_role)
    assert _project(client_for(token_for(user, organization=org)), project) == expected
    org_body = client_for(token_for(user, organization=org)).get(f"/api/v1/organizations/{org.pk}/").json()
    assert org_body["role"] == org_role


def test_a_project_viewer_cannot_write_and_a_project_member_can(acme):
    org, project = acme
    viewer, dev = make_user("viewer@acme.test"), make_user("dev@acme.test")
    member(viewer, org, ProjectRole.VIEWER, project)
    member(dev, org, ProjectRole.MEMBER, project)
    assert _project(client_for(token_for(viewer, project=project)), project) == ("viewer", False)
    assert _project(client_for(token_for(dev, project=project)), project) == ("member", True)
    # and the API agrees: the viewer's write is refused
    response = client_for(token_for(viewer, project=project)).post(
        "/api/v1/ssh-keys/", {"project": str(project.pk), "name": "k", "public_key": "ssh-ed25519 AAAA x"},
        format="json")
    assert response.status_code == 403


def test_a_read_only_token_cannot_write_even_for_an_owner(acme):
    org, project = acme
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    assert _project(client_for(token_for(owner, organization=org, scope="read")), project) == ("admin", False)


def test_staff_without_a_membership_write_in_no_project(acme):
    """Staff act in a customer's projects only by a membership (docs/adr/0104): no staff role writes there."""
    _org, project = acme
    operator = make_user("op@example.com", staff_role=StaffRole.OPERATOR)
    support = make_user("support@example.com", staff_role=StaffRole.SUPPORT)
    assert _project(client_for(token_for(operator, staff=True)), project) == (None, False)
    assert _project(client_for(token_for(support, staff=True)), project) == (None, False)


def test_the_console_session_sees_its_role_too(acme):
    org, project = acme
    viewer = make_user("viewer@acme.test", password="correct horse battery")
    member(viewer, org, OrgRole.VIEWER)
    browser = Client()
    browser.force_login(viewer)
    body = browser.get("/api/v1/projects/").json()["results"][0]
    assert (body["role"], body["can_write"]) == ("viewer", False)


def _org(client, org):
    body = client.get(f"/api/v1/organizations/{org.pk}/").json()
    return body["role"], body["can_manage_members"]


@pytest.mark.parametrize("org_role,manages", [
    (OrgRole.OWNER, True), (OrgRole.ADMIN, True), (OrgRole.MEMBER, False), (OrgRole.BILLING, False),
    (OrgRole.VIEWER, False),
])
def test_can_manage_members_follows_the_organization_role_and_the_api_agrees(acme, org_role, manages):
    org, _project = acme
    user = make_user(f"{org_role}@acme.test")
    member(user, org, org_role)
    client = client_for(token_for(user, organization=org))
    assert _org(client, org) == (org_role, manages)
    response = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@acme.test",
                                                    "role": "viewer"}, format="json")
    assert response.status_code == (201 if manages else 403), response.content


def test_can_manage_members_is_false_for_a_read_token_and_staff_without_a_membership(acme):
    org, _project = acme
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    assert _org(client_for(token_for(owner, organization=org, scope="read")), org) == ("owner", False)
    operator = make_user("op@example.com", staff_role=StaffRole.OPERATOR)
    support = make_user("support@example.com", staff_role=StaffRole.SUPPORT)
    assert _org(client_for(token_for(operator, staff=True)), org) == (None, False)
    assert _org(client_for(token_for(support, staff=True)), org) == (None, False)


@pytest.mark.parametrize("project_role,manages", [
    (ProjectRole.ADMIN, True), (ProjectRole.MEMBER, False), (ProjectRole.VIEWER, False),
])
def test_a_project_admin_manages_the_projects_members_and_the_api_agrees(acme, project_role, manages):
    """`can_manage_members` on a project is the membership and invitation services' rule for a project: its
    admins invite to it and change its project memberships, though not the organization's."""
    org, project = acme
    user = make_user(f"{project_role}@acme.test")
    member(user, org, project_role, project)
    dev = make_user("dev@acme.test")
    dev_membership = member(dev, org, ProjectRole.MEMBER, project)
    client = client_for(token_for(user, project=project))
    body = client.get(f"/api/v1/projects/{project.pk}/").json()
    assert (body["role"], body["can_manage_members"]) == (project_role, manages)
    org_body = client.get(f"/api/v1/organizations/{org.pk}/").json()
    assert org_body["can_manage_members"] is False
    response = client.post("/api/v1/invitations/", {"organization": str(org.pk), "project": str(project.pk),
                                                    "email": "new@acme.test", "role": "viewer"}, format="json")
    assert response.status_code == (201 if manages else 403), response.content
    response = client.patch(f"/api/v1/memberships/{dev_membership.pk}/", {"role": "viewer"}, format="json")
    assert response.status_code == (200 if manages else 403), response.content
    response = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "org@acme.test",
                                                    "role": "viewer"}, format="json")
    assert response.status_code == 403, response.content   # the organization's members are not theirs


@pytest.mark.parametrize("org_role,manages", [
    (OrgRole.OWNER, True), (OrgRole.ADMIN, True), (OrgRole.MEMBER, False), (OrgRole.VIEWER, False),
])
def test_an_organization_admin_manages_every_projects_members(acme, org_role, manages):
    org, project = acme
    user = make_user(f"{org_role}@acme.test")
    member(user, org, org_role)
    body = client_for(token_for(user, organization=org)).get(f"/api/v1/projects/{project.pk}/").json()
    assert body["can_manage_members"] is manages
    owner = make_user("first-owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    read = client_for(token_for(owner, organization=org, scope="read")).get(f"/api/v1/projects/{project.pk}/").json()
    assert read["can_manage_members"] is False
