"""Authorization-matrix entries of the tenancy app: organizations, projects, memberships, invitations, quotas."""
import datetime as dt

from apps.core.clock import now
from apps.identity.models import User
from apps.tenancy.models import Invitation, Membership, Quota
from apps.tenancy.services.invitations import invitation_token
from tests.tenancy.helpers import make_project, make_user, member

from .framework import Case, Entry, expect, mutation

# a body that names organization A: another tenant's id is "does not exist" (400), never a 403; staff, no member of
# A, write nothing inside it (403 `staff_not_member`, docs/adr/0104) but its quotas
CREATE_IN_A = mutation(other_org=400, admin=201, staff=403)


def _org(world) -> Case:
    return Case(kwargs={"pk": world.org_a.pk})


def _project(world) -> Case:
    return Case(kwargs={"pk": world.project_a.pk})


def _empty_project(world) -> Case:
    return Case(kwargs={"pk": make_project(world.org_a, "to-delete").pk})


def _member_membership(world) -> Case:
    row = Membership.objects.get(user=world.users["member"], organization=world.org_a, project=None)
    return Case(kwargs={"pk": row.pk}, data={"role": "viewer"})


def _extra_membership(world) -> Case:
    row = member(make_user("leaving@alpha.test"), world.org_a, "member")
    return Case(kwargs={"pk": row.pk})


def _invitation(world) -> Invitation:
    return Invitation.objects.create(organization=world.org_a, email="newcomer@example.test", role="member",
                                     expires_at=now() + dt.timedelta(days=1))


def _accept(world) -> Case:
    return Case(data={"token": invitation_token(_invitation(world)), "password": "a-long-password-42"})


def _org_quota(world) -> Case:
    return Case(kwargs={"pk": Quota.objects.get(organization=world.org_a, project=None, resource="gpus").pk},
                data={"limit": 3})


def _project_quota(world) -> Case:
    quota = Quota.objects.create(organization=world.org_a, project=world.project_a, resource="vcpus", limit=8)
    return Case(kwargs={"pk": quota.pk})


def _new_user(world) -> Case:
    if not User.objects.filter(email="joining@example.test").exists():
        make_user("joining@example.test")
    return Case(data={"organization": str(world.org_a.pk), "user_email": "joining@example.test", "role": "member"})


LIST = expect(other_org=200)
ENTRIES = [
    Entry("GET", "/api/v1/organizations", LIST),
    Entry("POST", "/api/v1/organizations",
          mutation(other_org=403, admin=403, staff=201),
          lambda w: Case(data={"slug": "gamma", "name": "Gamma", "owner_email": "owner@gamma.test"})),
    Entry("GET", "/api/v1/organizations/{pk}", expect(), _org),
    Entry("PATCH", "/api/v1/organizations/{pk}", mutation(),
          lambda w: Case(kwargs={"pk": w.org_a.pk}, data={"name": "Alpha Renamed"})),
    Entry("GET", "/api/v1/projects", LIST),
    Entry("POST", "/api/v1/projects", CREATE_IN_A,
          lambda w: Case(data={"organization": str(w.org_a.pk), "slug": "new-one", "name": "New"})),
    Entry("GET", "/api/v1/projects/{pk}", expect(), _project),
    Entry("PATCH", "/api/v1/projects/{pk}", mutation(staff=403),
          lambda w: Case(kwargs={"pk": w.project_a.pk}, data={"description": "changed"})),
    Entry("DELETE", "/api/v1/projects/{pk}", mutation(admin=204, staff=403), _empty_project),
    Entry("GET", "/api/v1/memberships", LIST),
    # adding a user sends an invitation they accept: 202 with the pending invitation
    Entry("POST", "/api/v1/memberships", mutation(other_org=400, admin=202, staff=403), _new_user),
    Entry("GET", "/api/v1/memberships/{pk}", expect(), _member_membership),
    Entry("PATCH", "/api/v1/memberships/{pk}", mutation(staff=403), _member_membership),
    Entry("DELETE", "/api/v1/memberships/{pk}", mutation(admin=204, staff=403), _extra_membership),
    Entry("GET", "/api/v1/invitations", LIST),
    Entry("POST", "/api/v1/invitations", CREATE_IN_A,
          lambda w: Case(data={"organization": str(w.org_a.pk), "email": "invitee@example.test", "role": "viewer"})),
    # invitations are visible to owners/admins only: a viewer or member gets 404 like another tenant
    Entry("GET", "/api/v1/invitations/{pk}", expect(viewer=404, member=404),
          lambda w: Case(kwargs={"pk": _invitation(w).pk})),
    Entry("DELETE", "/api/v1/invitations/{pk}", mutation(viewer=404, member=404, admin=204, staff=403),
          lambda w: Case(kwargs={"pk": _invitation(w).pk})),
    # the token is the credential: anyone holding it may accept, but only as the invited e-mail
    Entry("POST", "/api/v1/invitations/accept",
          expect(anonymous=201, other_org=403, viewer=403, member=403, admin=403, read_token=403, staff=403),
          _accept),
    Entry("GET", "/api/v1/quotas", LIST),
    Entry("POST", "/api/v1/quotas", mutation(other_org=400, admin=201, staff=201),
          lambda w: Case(data={"organization": str(w.org_a.pk), "project": str(w.project_a.pk),
                               "resource": "gpus", "limit": 2})),
    Entry("GET", "/api/v1/quotas/{pk}", expect(), _org_quota),
    # organization-level limits are the provider's: organization admins cannot raise them
    Entry("PATCH", "/api/v1/quotas/{pk}", mutation(admin=403), _org_quota),
    Entry("DELETE", "/api/v1/quotas/{pk}", mutation(admin=204, staff=204), _project_quota),
]

# self sign-up is off by default: the endpoints do not exist for anyone
SIGNUP_OFF = expect(404, 404, 404, 404, 404, 404, 404)
ENTRIES += [
    Entry("POST", "/api/v1/signup", SIGNUP_OFF, lambda w: Case(data={"email": "someone@example.test"})),
    Entry("POST", "/api/v1/signup/verify", SIGNUP_OFF,
          lambda w: Case(data={"token": "x", "password": "a-long-password-42", "organization_slug": "x"})),
]
