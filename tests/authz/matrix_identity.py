"""Authorization-matrix entries of the identity app: tokens, service accounts, /me, TOTP, the console session."""
from apps.identity.models import ServiceAccount
from apps.identity.services import api_token_create, service_account_create

from .framework import Case, Entry, expect, mutation

OWN = expect(other_org=200)  # every authenticated caller has its own


def _member_token(world) -> Case:
    row, _raw = api_token_create(actor=None, user=world.users["member"], name="laptop", scope="read",
                                 organization=world.org_a)
    return Case(kwargs={"pk": row.pk})


def _service_account(world) -> Case:
    account: ServiceAccount = service_account_create(actor=None, organization=world.org_a, name="terraform")
    return Case(kwargs={"pk": account.pk})


def _login(world) -> Case:
    user = world.users["member"]
    user.set_password("a-long-password-42")
    user.save(update_fields=["password"])
    return Case(data={"email": user.email, "password": "a-long-password-42"})


ENTRIES = [
    Entry("GET", "/api/v1/tokens", OWN),
    # any member may mint a token for its organization: a token never grants more than its user's role;
    # staff have no organization-A role (they use staff tokens), so organization A does not exist for them
    Entry("POST", "/api/v1/tokens", mutation(other_org=400, viewer=201, member=201, admin=201, staff=404),
          lambda w: Case(data={"name": "ci", "scope": "read", "organization": str(w.org_a.pk)})),
    # a token is visible to its user (and staff); others get 404
    Entry("GET", "/api/v1/tokens/{pk}", expect(viewer=404, admin=404, read_token=404), _member_token),
    Entry("DELETE", "/api/v1/tokens/{pk}",
          mutation(viewer=404, member=204, admin=404, read_token=404, staff=204), _member_token),
    Entry("GET", "/api/v1/service-accounts", OWN),
    Entry("POST", "/api/v1/service-accounts", mutation(other_org=400, admin=201, staff=201),
          lambda w: Case(data={"organization": str(w.org_a.pk), "name": "ci", "role": "member"})),
    Entry("GET", "/api/v1/service-accounts/{pk}", expect(), _service_account),
    Entry("DELETE", "/api/v1/service-accounts/{pk}", mutation(admin=204, staff=204), _service_account),
    Entry("GET", "/api/v1/me", OWN),
    Entry("PATCH", "/api/v1/me", mutation(other_org=200, viewer=200, member=200),
          lambda w: Case(data={"full_name": "Renamed"})),
    Entry("POST", "/api/v1/me/totp", mutation(other_org=201, viewer=201, member=201, admin=201, staff=201)),
    # nobody has a pending enrolment here: 400 no_pending_totp (a read token is refused first)
    Entry("POST", "/api/v1/me/totp/confirm", mutation(other_org=400, viewer=400, member=400, admin=400, staff=400),
          lambda w: Case(data={"otp_token": "123456"})),
    Entry("GET", "/api/v1/session", expect(anonymous=200, other_org=200), audited=False),
    Entry("POST", "/api/v1/session", expect(anonymous=200, other_org=200), _login),
    Entry("DELETE", "/api/v1/session", expect(204, 204, 204, 204, 204, 204, 204), audited=False),
]
