"""Sign-in services: console password sign-in, single sign-on resolution, second factors, security audit events.

Rules (docs/tenancy.md, "Console login, two-factor, single sign-on"):
- A session records how and when it was signed in (`mark_signed_in`): method `password` or `sso`, the time, and
  whether the identity provider asserted multi-factor authentication (`amr`/`acr`, see `sso_asserts_mfa`).
- Enrolling, confirming and removing a second factor, and generating recovery codes, need a *recent
  interactive* sign-in (`require_recent_sign_in`): a console session (never an API token) signed in at most
  `SIGN_IN_REAUTH_MAX_AGE_SECONDS` ago, verified with the current second factor when the user has one.
- SSO links an identity to an account by the provider's (`iss`, `sub`); an unlinked identity is linked only from a
  verified e-mail (`email_verified` true or "true"), never to a staff account by e-mail alone (`sso_resolve_user`).
- Every sign-in (and each step of it), failed sign-in, sign-out, factor change and refused factor change writes an
  audit event into each organization the user belongs to, so that organization's members (its owners) can list
  it (`security_event`).

Errors (problem+json `code`): 401 `invalid_credentials`, `otp_required`, `invalid_otp`; 403
`interactive_session_required`, `reauthentication_required`, `otp_required`; 400 `no_pending_totp`,
`invalid_otp`, `no_second_factor`; 404 `not_found`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import authenticate, login
from django.db import transaction
from django_otp import login as otp_login
from django_otp import match_token
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import DomainError, NotFound, ValidationFailed
from apps.tenancy import authz
from apps.tenancy.errors import Forbidden

from . import recovery
from .models import ExternalIdentity, RecoveryCode, RecoveryCodeDevice, User

SESSION_SIGNED_IN_AT = "gpucloud_signed_in_at"
SESSION_METHOD = "gpucloud_sign_in_method"
SESSION_SSO_MFA = "gpucloud_sso_mfa"


# --- session state ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignInState:
    """How the current request is authenticated. `second_factor`: the session was verified with a device
    (TOTP or a recovery code, django-otp) or signed in by SSO with an MFA assertion."""

    interactive: bool
    signed_in_at: float | None
    method: str
    second_factor: bool


def mark_signed_in(session, *, method: str, mfa: bool = False) -> None:
    """Record on a freshly signed-in session how (`password` | `sso`) and when; `mfa` for an SSO MFA assertion."""
    session[SESSION_SIGNED_IN_AT] = time.time()
    session[SESSION_METHOD] = method
    session[SESSION_SSO_MFA] = bool(mfa)


def session_second_factor(user, session) -> bool:
    """True when the session has a verified second factor (django-otp device or SSO MFA)."""
    check = getattr(user, "is_verified", None)
    if (check and check()) or getattr(user, "otp_device", None) is not None:  # OTPMiddleware / django_otp.login
        return True
    return bool(session is not None and session.get(SESSION_SSO_MFA))


def sign_in_state(request) -> SignInState:
    """The `SignInState` of a DRF or Django request."""
    if getattr(request, "auth", None) is not None or not hasattr(request, "session"):
        return SignInState(interactive=False, signed_in_at=None, method="token", second_factor=False)
    session = request.session
    return SignInState(interactive=True, signed_in_at=session.get(SESSION_SIGNED_IN_AT),
                       method=session.get(SESSION_METHOD, ""),
                       second_factor=session_second_factor(request.user, session))


def has_second_factor(user) -> bool:
    """True when `user` has a confirmed TOTP device (recovery codes come with it and go with it)."""
    return TOTPDevice.objects.filter(user_id=user.pk, confirmed=True).exists()


def two_factor_required(user) -> bool:
    """True when `user` must have a second factor: an organization it belongs to (directly or through a project)
    has `require_2fa`, or it is provider staff and `STAFF_REQUIRE_2FA` is on (the default)."""
    from apps.tenancy.models import Membership

    if getattr(settings, "STAFF_REQUIRE_2FA", True) and (user.staff_role or user.is_staff or user.is_superuser):
        return True
    return Membership.objects.filter(user_id=user.pk, organization__require_2fa=True).exists()


def missing_second_factor(user, session) -> str | None:
    """The problem `code` when a session may not be used yet: `otp_required` (the user has a device and the
    session is not verified with it), `two_factor_required` (a second factor is required and none is enrolled);
    None when the session may proceed."""
    if session_second_factor(user, session):
        return None
    if has_second_factor(user):
        return "otp_required"
    if two_factor_required(user):
        return "two_factor_required"
    return None


def require_second_factor(user, session) -> None:
    """The two-factor gate of a console session, one function for every door (`SessionAuthentication` for the
    API, the server-rendered invitation page): 403 `otp_required` (enter the code: `POST /session/otp`) or 403
    `two_factor_required` (enrol a TOTP device: `POST /me/totp/`) when `missing_second_factor` says so;
    returns None when the session may proceed."""
    code = missing_second_factor(user, session)
    if code == "otp_required":
        raise Forbidden("Enter the code from your authenticator app: POST /session/otp.", code=code)
    if code is not None:
        raise Forbidden("A second factor is required (your organization or staff role): enrol a TOTP device.",
                        code=code)


def require_recent_sign_in(user, state: SignInState) -> None:
    """403 unless `state` is an interactive session signed in within `SIGN_IN_REAUTH_MAX_AGE_SECONDS`, verified
    with the current second factor when `user` has one."""
    if not state.interactive:
        raise Forbidden("Second factors can only be changed from a console session, not with an API token.",
                        code="interactive_session_required")
    max_age = settings.SIGN_IN_REAUTH_MAX_AGE_SECONDS
    if state.signed_in_at is None or time.time() - state.signed_in_at > max_age:
        raise Forbidden(f"Sign in again (password or single sign-on) to change second factors; a sign-in counts "
                        f"for {max_age} seconds.", code="reauthentication_required", max_age_seconds=max_age)
    if has_second_factor(user) and not state.second_factor:
        raise Forbidden("Enter the code from your authenticator app first.", code="otp_required")


# --- audit --------------------------------------------------------------------------------------------------

def _organization_ids(user) -> list:
    from apps.tenancy.models import Membership

    if user is None or not getattr(user, "pk", None):
        return []
    return sorted(set(Membership.objects.filter(user_id=user.pk).values_list("organization_id", flat=True)))


def security_event(action: str, user, *, actor=None, before: dict | None = None, after: dict | None = None,
                   target_id: str = "") -> None:
    """Write `action` about `user` once per organization it belongs to (once unscoped when it has none), so the
    owners of each see it. `actor` defaults to `user`; `user` None is an unknown account (`after` says which
    e-mail was tried). Never a secret in `before`/`after`."""
    actor = user if actor is None else actor
    kwargs = dict(actor=actor, action=action, target_type="identity.user",
                  target_id=target_id or (str(user.pk) if user is not None else ""), before=before, after=after)
    with transaction.atomic():
        for organization_id in _organization_ids(user) or [None]:
            audit_record(organization=organization_id, **kwargs)


def _refuse(action: str, user, code: str, detail: str, status: int, **after) -> DomainError:
    """Record a failed sign-in and return the error to raise (the audit row is committed, the error still
    answers)."""
    security_event(action, user, actor=user, after={"reason": code, **after})
    return DomainError(detail, code=code, status=status)


# --- password sign-in ---------------------------------------------------------------------------------------

def session_login(*, request, email: str, password: str, otp_token: str = "") -> User:
    """Console sign-in: password, plus a code (TOTP or a recovery code) when the user has a confirmed device.

    401 `invalid_credentials`, 401 `otp_required` (a device exists but no code was sent), 401 `invalid_otp`.
    The right password without a code is recorded as `session.otp_required` (the account's owners see that
    its password is known). A user without a device signs in unverified; when a second factor is required (organization `require_2fa`,
    staff) the session then only allows `/me`, `/me/totp*` and `/session*` until one is enrolled."""
    email = email.strip().lower()
    user = authenticate(request, username=email, password=password)
    if user is None:
        known = User.objects.filter(email__iexact=email).first()
        raise _refuse("session.login_failed", known, "invalid_credentials", "E-mail or password is wrong.", 401,
                      method="password", email=email)
    device = None
    if has_second_factor(user):
        if not otp_token:  # the password was right: a sign-in step, recorded like the others
            security_event("session.otp_required", user, after={"method": "password"})
            raise DomainError("Enter the code from your authenticator app.", code="otp_required", status=401)
        device = match_token(user, otp_token)
        if device is None:
            raise _refuse("session.login_failed", user, "invalid_otp", "The code is not valid.", 401,
                          method="password")
    with transaction.atomic():
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        if device is not None:
            otp_login(request, device)
        mark_signed_in(request.session, method="password")
        security_event("session.login", user, after={"method": "password", "two_factor": device is not None,
                                                    "recovery_code": isinstance(device, RecoveryCodeDevice)})
    return user


def session_verify_otp(*, request, otp_token: str) -> None:
    """Verify the signed-in session's second factor with a TOTP or recovery code (after a single sign-on without
    an MFA assertion). 400 `no_second_factor` when the user has no device; 401 `invalid_otp`."""
    user = request.user
    if not has_second_factor(user):
        raise ValidationFailed("You have no second factor to verify.", code="no_second_factor")
    device = match_token(user, otp_token)
    if device is None:
        raise _refuse("session.otp_failed", user, "invalid_otp", "The code is not valid.", 401,
                      method=request.session.get(SESSION_METHOD, ""))
    with transaction.atomic():
        otp_login(request, device)
        security_event("session.otp_verified", user,
                       after={"method": request.session.get(SESSION_METHOD, ""),
                              "recovery_code": isinstance(device, RecoveryCodeDevice)})


def logout_recorded(request) -> None:
    """Record `session.logout` (`method`: how the session signed in) for the request's signed-in user, before
    its session ends; nothing for an anonymous request. Every sign-out path calls it (`session_logout`, the
    OIDC logout view)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        security_event("session.logout", user, after={"method": request.session.get(SESSION_METHOD, "")})


def session_logout(*, request) -> None:
    """Sign out the session's user (idempotent) and record it."""
    from django.contrib.auth import logout

    with transaction.atomic():
        logout_recorded(request)
        logout(request)


# --- second factors -----------------------------------------------------------------------------------------

def _require_factor_change(actor, state: SignInState, attempted: str) -> None:
    """`require_write_token` and `require_recent_sign_in` for a factor change; a refusal (an API token: 403
    `interactive_session_required`, `token_read_only`; `reauthentication_required`, `otp_required`) is recorded
    as `second_factor.change_refused` (`attempted`, `reason`) in every organization of the user, then raised."""
    try:
        authz.require_write_token(actor)
        require_recent_sign_in(actor, state)
    except Forbidden as refused:
        security_event("second_factor.change_refused", actor,
                       after={"attempted": attempted, "reason": refused.code, "method": state.method})
        refused.audited = True
        raise


def totp_enrol(*, actor, state: SignInState) -> TOTPDevice:
    """Start TOTP enrolment (replaces any unconfirmed device); the device's `config_url` is shown once.
    Needs a recent interactive sign-in (`require_recent_sign_in`)."""
    _require_factor_change(actor, state, "totp.enrol")
    with transaction.atomic():
        TOTPDevice.objects.filter(user_id=actor.pk, confirmed=False).delete()
        device = TOTPDevice.objects.create(user_id=actor.pk, name="default", confirmed=False)
        security_event("totp.enrol", actor, after={"device": device.pk})
    return device


def _new_recovery_codes(user) -> list[str]:
    RecoveryCodeDevice.objects.filter(user_id=user.pk).delete()
    device = RecoveryCodeDevice.objects.create(user_id=user.pk, name="recovery", confirmed=True)
    codes = recovery.generate()
    RecoveryCode.objects.bulk_create([RecoveryCode(device=device, digest=recovery.digest(c)) for c in codes])
    return codes


def totp_confirm(*, actor, state: SignInState, otp_token: str) -> tuple[TOTPDevice, list[str]]:
    """Confirm the pending device with a current code; replaces any earlier confirmed device and returns fresh
    recovery codes (shown once). 400 `no_pending_totp`, 400 `invalid_otp`; 403 as `require_recent_sign_in`."""
    _require_factor_change(actor, state, "totp.confirm")
    with transaction.atomic():
        device = TOTPDevice.objects.select_for_update().filter(user_id=actor.pk, confirmed=False).first()
        if device is None:
            raise ValidationFailed("No TOTP enrolment is pending.", code="no_pending_totp")
        if not device.verify_token(otp_token):
            raise ValidationFailed("The code is not valid.", code="invalid_otp",
                                   errors={"otp_token": ["invalid code"]})
        TOTPDevice.objects.filter(user_id=actor.pk, confirmed=True).delete()
        device.confirmed = True
        device.save(update_fields=["confirmed"])
        codes = _new_recovery_codes(actor)
        security_event("totp.confirm", actor, after={"device": device.pk, "recovery_codes": len(codes)})
    return device, codes


def recovery_codes_regenerate(*, actor, state: SignInState) -> list[str]:
    """Replace the caller's recovery codes (the old ones stop working). 400 `no_second_factor` without a TOTP
    device; 403 as `require_recent_sign_in`."""
    _require_factor_change(actor, state, "recovery_codes.generate")
    if not has_second_factor(actor):
        raise ValidationFailed("Enrol a TOTP device first.", code="no_second_factor")
    with transaction.atomic():
        codes = _new_recovery_codes(actor)
        security_event("recovery_codes.generate", actor, after={"recovery_codes": len(codes)})
    return codes


def _remove_factors(user) -> int:
    removed, _ = TOTPDevice.objects.filter(user_id=user.pk).delete()
    RecoveryCodeDevice.objects.filter(user_id=user.pk).delete()
    return removed


def totp_remove(*, actor, state: SignInState) -> None:
    """Remove the caller's TOTP device and recovery codes. 400 `no_second_factor` when there is none; 403 as
    `require_recent_sign_in` (the session must be verified with the device or a recovery code)."""
    _require_factor_change(actor, state, "totp.remove")
    with transaction.atomic():
        if not _remove_factors(actor):
            raise ValidationFailed("You have no second factor to remove.", code="no_second_factor")
        security_event("totp.remove", actor, after={"by": "user"})


def two_factor_reset(*, actor, user_id, reason: str) -> User:
    """Staff: remove a user's TOTP device and recovery codes (the user lost both), with a reason kept in the
    audit event. Staff operators only (403 otherwise); 404 `not_found` for an unknown user; 400 `no_second_factor`
    when the user has none."""
    authz.authorize_staff(actor)
    user = User.objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound("User not found.")
    with transaction.atomic():
        if not _remove_factors(user):
            raise ValidationFailed("This user has no second factor.", code="no_second_factor")
        security_event("totp.reset", user, actor=actor, after={"by": "staff", "reason": reason})
    return user


# --- single sign-on -----------------------------------------------------------------------------------------

class SsoRefused(Exception):
    """A single sign-on that must not sign anyone in; `code` names the reason (shown on the failure page)."""

    def __init__(self, code: str, user=None):
        super().__init__(code)
        self.code = code
        self.user = user


def email_is_verified(claims: dict) -> bool:
    """Only a boolean true or the string "true" (any case) counts; a missing claim is not verified."""
    value = claims.get("email_verified")
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def sso_asserts_mfa(claims: dict) -> bool:
    """True when the ID token says the provider used more than one factor: an `amr` value (RFC 8176) in
    `OIDC_MFA_AMR_VALUES` or an `acr` in `OIDC_MFA_ACR_VALUES`."""
    amr = claims.get("amr") or []
    if isinstance(amr, str):
        amr = amr.split()
    if {str(v) for v in amr} & set(settings.OIDC_MFA_AMR_VALUES):
        return True
    acr = claims.get("acr")
    return bool(acr) and str(acr) in set(settings.OIDC_MFA_ACR_VALUES)


def _pending_invitation_exists(email: str) -> bool:
    from apps.tenancy.models import Invitation

    return Invitation.objects.filter(email__iexact=email, accepted_at__isnull=True, revoked_at__isnull=True,
                                     expires_at__gt=now()).exists()


def _is_staff_account(user) -> bool:
    return bool(user.staff_role or user.is_staff or user.is_superuser)


def sso_resolve_user(*, claims: dict, current_user=None) -> User:
    """The account a single sign-on with ID-token + userinfo `claims` (`iss`, `sub`, `email`, `email_verified`,
    `name`) signs in to, linking the identity when it is new. Raises `SsoRefused(code)`:

    - linked (`iss`, `sub`): that account (`account_disabled` if it is inactive);
    - `current_user` (signed in recently, with its second factor): links the new identity to it, staff included;
    - otherwise `email_missing`, `email_not_verified`, `staff_link_refused` (a staff account is never linked by
      e-mail), `identity_conflict` (the account is linked to another subject of the same issuer),
      `account_disabled`, `no_account` (no account, no pending invitation, `OIDC_CREATE_USER` off).
    A new account is created for a pending invitee (or anyone with `OIDC_CREATE_USER`)."""
    issuer, subject = str(claims.get("iss") or ""), str(claims.get("sub") or "")
    if not issuer or not subject:
        raise SsoRefused("claims_invalid")
    email = (claims.get("email") or "").strip().lower()
    with transaction.atomic():
        link = ExternalIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        if link is not None:
            if not link.user.is_active:
                raise SsoRefused("account_disabled", link.user)
            ExternalIdentity.objects.filter(pk=link.pk).update(last_sign_in_at=now())
            return link.user
        if current_user is not None:
            user = current_user
        else:
            if not email:
                raise SsoRefused("email_missing")
            if not email_is_verified(claims):
                raise SsoRefused("email_not_verified", User.objects.filter(email__iexact=email).first())
            user = User.objects.filter(email__iexact=email).first()
            if user is not None:
                if user.is_service_account or not user.is_active:
                    raise SsoRefused("account_disabled", user)
                if _is_staff_account(user):
                    raise SsoRefused("staff_link_refused", user)
            elif settings.OIDC_CREATE_USER or _pending_invitation_exists(email):
                user = User.objects.create_user(email, full_name=str(claims.get("name") or "")[:200])
            else:
                raise SsoRefused("no_account")
        if ExternalIdentity.objects.filter(user=user, issuer=issuer).exists():
            raise SsoRefused("identity_conflict", user)
        ExternalIdentity.objects.create(user=user, issuer=issuer, subject=subject, email_at_link=email,
                                        last_sign_in_at=now())
        security_event("sso.link", user, after={"issuer": issuer, "subject": subject, "email": email,
                                               "by": "session" if current_user is not None else "verified_email"})
    return user


def sso_signed_in(*, request, user, mfa: bool) -> None:
    """After `login()` of a single sign-on: mark the session and record the sign-in."""
    with transaction.atomic():
        mark_signed_in(request.session, method="sso", mfa=mfa)
        security_event("session.login", user, after={"method": "sso", "two_factor": mfa})


def sso_failed(*, code: str, user=None) -> None:
    """Record a refused or failed single sign-on (`user` when the attempt named a known account)."""
    security_event("session.login_failed", user, actor=user, after={"method": "sso", "reason": code})
