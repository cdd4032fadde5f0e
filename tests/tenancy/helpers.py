"""Builders for tenancy tests: real rows through the real services (no mocks)."""
from __future__ import annotations

from rest_framework.test import APIClient

from apps.identity.models import User
from apps.identity.services import api_token_create
from apps.tenancy.models import Membership, Organization, OrgRole, Project


def make_user(email: str, *, staff_role: str = "", password: str | None = None) -> User:
    return User.objects.create_user(email, password, staff_role=staff_role)


def make_org(slug: str, *, plan: str = "default", **fields) -> Organization:
    from apps.tenancy.models import Quota
    from apps.tenancy.quotas import PLANS

    org = Organization.objects.create(slug=slug, name=slug.title(), plan=plan, **fields)
    Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v) for r, v in PLANS[plan].items()])
    return org


def make_project(org: Organization, slug: str) -> Project:
    return Project.objects.create(organization=org, slug=slug, name=slug.title())


def member(user: User, org: Organization, role: str, project: Project | None = None) -> Membership:
    return Membership.objects.create(user=user, organization=org, project=project, role=role)


def token_for(user: User, *, scope: str = "write", organization=None, project=None, staff: bool = False) -> str:
    _row, raw = api_token_create(actor=None, user=user, name="test", scope=scope, organization=organization,
                                 project=project, staff=staff)
    return raw


def client_for(raw_token: str | None) -> APIClient:
    client = APIClient()
    if raw_token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


def org_owner_client(slug: str = "acme", email: str = "owner@acme.test") -> tuple[Organization, User, APIClient]:
    """A new organization, its owner, and an API client with an organization-bound token of that owner."""
    org = make_org(slug)
    owner = make_user(email)
    member(owner, org, OrgRole.OWNER)
    return org, owner, client_for(token_for(owner, organization=org))
