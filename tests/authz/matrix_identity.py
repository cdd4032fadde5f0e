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


def _member_with_totp(world) -> Case:
    from django_otp.plugins.otp_totp.models import TOTPDevice

    TOTPDevice.objects.create(user=world.users["member"], name="default", confirmed=True)
    return Case(kwargs={"pk": world.users["member"].pk}, data={"reason": "lost the phone"})


NO_TOKEN = mutation(other_org=403, viewer=403, member=403, admin=403, staff=403)

ENTRIES = [
    Entry("GET", "/api/v1/tokens", OWN),
    # any member may mint a token for its organization: a token never grants more than its user's role;
    # staff have no organization-A role (they use staff tokens), so organization A does not exist for them
    Entry("POST", "/api/v1/tokens", mutation(other_org=400, viewer=201, member=201, admin=201, staff=404),
          lambda w: Case(data={"name": "ci", "scope": "read", "organization": str(w.org_a.pk)}),
          refusal_audited=("read_token",)),  # token_read_only: api_token.create_refused
    # a token is visible to its user, to the owners of the organization it is bound to (read_token is the
    # owner's: it reads, and cannot revoke with a read scope) and to staff; others get 404
    Entry("GET", "/api/v1/tokens/{pk}", expect(viewer=404, admin=404), _member_token),
    Entry("DELETE", "/api/v1/tokens/{pk}",
          mutation(viewer=404, member=204, admin=404, read_token=403, staff=204), _member_token),
    Entry("GET", "/api/v1/service-accounts", OWN),
    Entry("POST", "/api/v1/service-accounts", mutation(other_org=400, admin=201, staff=403),
          lambda w: Case(data={"organization": str(w.org_a.pk), "name": "ci", "role": "member"})),
    Entry("GET", "/api/v1/service-accounts/{pk}", expect(), _service_account),
    Entry("DELETE", "/api/v1/service-accounts/{pk}", mutation(admin=204, staff=403), _service_account),
    Entry("GET", "/api/v1/me", OWN),
    Entry("PATCH", "/api/v1/me", mutation(other_org=200, viewer=200, member=200),
          lambda w: Case(data={"full_name": "Renamed"})),
    # second factors change only from a recent console sign-in: every API token is refused (403
    # interactive_session_required; a read token is refused first with token_read_only), and the refusal is
    # audited (second_factor.change_refused)
    Entry("POST", "/api/v1/me/totp", NO_TOKEN, refusal_audited=True),
    Entry("DELETE", "/api/v1/me/totp", NO_TOKEN, refusal_audited=True),
    Entry("POST", "/api/v1/me/totp/confirm", NO_TOKEN, lambda w: Case(data={"otp_token": "123456"}),
          refusal_audited=True),
    Entry("POST", "/api/v1/me/totp/recovery-codes", NO_TOKEN, refusal_audited=True),
    Entry("POST", "/api/v1/session/otp", NO_TOKEN, lambda w: Case(data={"otp_token": "123456"})),
    # staff operators reset a user's factor (the member's, enrolled by the setup); tenants cannot
    Entry("POST", "/api/v1/users/{pk}/reset-two-factor", mutation(other_org=403, admin=403, staff=204),
          _member_with_totp, refusal_audited=True),  # second_factor.change_refused (attempted totp.reset)
    Entry("GET", "/api/v1/session", expect(anonymous=200, other_org=200), audited=False),
    Entry("POST", "/api/v1/session", expect(anonymous=200, other_org=200), _login),
    Entry("DELETE", "/api/v1/session", expect(204, 204, 204, 204, 204, 204, 204), audited=False),
]
