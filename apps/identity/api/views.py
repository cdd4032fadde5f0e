"""Identity API: /tokens, /service-accounts, /me (+ TOTP, recovery codes), /session (console sign-in, CSRF),
/session/otp, /users/{id}/reset-two-factor (staff)."""
from django.conf import settings
from django.middleware.csrf import get_token
from django.urls import reverse
from django_otp import login as otp_login
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication as DrfSessionAuthentication
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from apps.core.api import ApiViewMixin, validated
from apps.core.idempotency import idempotent_create
from apps.tenancy.errors import Forbidden

from .. import services, signin
from ..selectors import api_token_list_visible_to, service_account_list_visible_to
from ..throttles import DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE, SIGN_IN_THROTTLES, device_cookie_value
from . import filters
from . import serializers as s

UUID_RE = "[0-9a-fA-F-]{36}"


def _validated(cls, request, context=None):
    return validated(cls(data=request.data, context=context or {"request": request}))


class ApiTokenViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """API tokens. The secret is in the create response only; DELETE revokes (the row stays)."""

    serializer_class = s.ApiTokenOutput
    filterset_class = filters.ApiTokenFilter
    lookup_value_regex = UUID_RE

    def get_queryset(self):
        return api_token_list_visible_to(self.request.user)

    @extend_schema(request=s.ApiTokenCreateInput, responses={201: s.ApiTokenCreated})
    @idempotent_create(unstored=("token",))
    def create(self, request):
        data = _validated(s.ApiTokenCreateInput, request)
        account = data.pop("service_account")
        row, raw = services.api_token_create(actor=request.user, user=account.user if account else None, **data)
        return Response(s.ApiTokenCreated(row, context={"raw_token": raw}).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.api_token_revoke(actor=request.user, token=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Service accounts (automation users of one organization); DELETE disables one and revokes its tokens."""

    serializer_class = s.ServiceAccountOutput
    filterset_class = filters.ServiceAccountFilter
    lookup_value_regex = UUID_RE

    def get_queryset(self):
        return service_account_list_visible_to(self.request.user)

    @extend_schema(request=s.ServiceAccountCreateInput, responses={201: s.ServiceAccountOutput})
    def create(self, request):
        account = services.service_account_create(actor=request.user,
                                                  **_validated(s.ServiceAccountCreateInput, request))
        return Response(self.get_serializer(account).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.service_account_disable(actor=request.user, account=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(generics.GenericAPIView):
    """The caller: profile, memberships, the token of this request, 2FA state."""

    serializer_class = s.MeOutput
    allow_unverified_session = True

    def get(self, request):
        return Response(self.get_serializer(request.user).data)

    @extend_schema(request=s.MeUpdateInput, responses={200: s.MeOutput})
    def patch(self, request):
        user = services.user_update(actor=request.user, **_validated(s.MeUpdateInput, request))
        return Response(self.get_serializer(user).data)


class TotpViewSet(viewsets.GenericViewSet):
    """The caller's TOTP second factor: POST /me/totp (start), POST /me/totp/confirm (finish; recovery codes),
    DELETE /me/totp (remove), POST /me/totp/recovery-codes (new codes). Each needs a console session signed in
    within `SIGN_IN_REAUTH_MAX_AGE_SECONDS` and verified with the current factor when there is one; never an API
    token (403 `interactive_session_required` / `reauthentication_required` / `otp_required`)."""

    serializer_class = s.TotpEnrolmentOutput
    allow_unverified_session = True
    throttle_classes = SIGN_IN_THROTTLES

    @extend_schema(request=None, responses={201: s.TotpEnrolmentOutput})
    def create(self, request):
        device = signin.totp_enrol(actor=request.user, state=signin.sign_in_state(request))
        return Response({"config_url": device.config_url}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def remove(self, request):  # not `delete`: a method named after a verb would answer it on every route
        signin.totp_remove(actor=request.user, state=signin.sign_in_state(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.TotpConfirmInput, responses={200: s.TotpConfirmed})
    @action(detail=False, methods=["post"])
    def confirm(self, request):
        device, codes = signin.totp_confirm(actor=request.user, state=signin.sign_in_state(request),
                                            **_validated(s.TotpConfirmInput, request))
        otp_login(request._request, device)
        return Response(s.TotpConfirmed(request.user, context={"recovery_codes": codes}).data)

    @extend_schema(request=None, responses={200: s.RecoveryCodesOutput})
    @action(detail=False, methods=["post"], url_path="recovery-codes")
    def recovery_codes(self, request):
        codes = signin.recovery_codes_regenerate(actor=request.user, state=signin.sign_in_state(request))
        return Response({"recovery_codes": codes})


class SessionView(generics.GenericAPIView):
    """Console session. GET: state and CSRF token (sets the csrftoken cookie). POST: sign in (CSRF checked;
    throttled per account and address, per account and per address: 429 `throttled` with Retry-After; a success
    sets the `gpucloud_device` cookie that exempts this client from the account-wide ceiling, ADR 0103).
    DELETE: sign out."""

    serializer_class = s.SessionOutput
    permission_classes = [AllowAny]
    allow_unverified_session = True
    throttle_classes = SIGN_IN_THROTTLES

    def _state(self, request, code=status.HTTP_200_OK):
        user = request.user
        session = request._request.session
        authenticated = user.is_authenticated
        return Response({"authenticated": authenticated, "email": getattr(user, "email", None) or None,
                         "two_factor_verified": authenticated and signin.session_second_factor(user, session),
                         "sign_in_method": session.get(signin.SESSION_METHOD) if authenticated else None,
                         "second_factor_needed": signin.missing_second_factor(user, session) if authenticated
                         else None,
                         "csrf_token": get_token(request._request),
                         "sso_login_url": reverse("oidc_authentication_init") if settings.OIDC_ENABLED else None},
                        status=code)

    def get(self, request):
        return self._state(request)

    @extend_schema(request=s.LoginInput, responses={200: s.SessionOutput})
    def post(self, request):
        DrfSessionAuthentication().enforce_csrf(request)
        data = _validated(s.LoginInput, request)
        signin.session_login(request=request._request, **data)
        request.user = request._request.user
        response = self._state(request)
        # this client is now known for the account: the account-wide attempt ceiling no longer binds it (ADR 0103)
        response.set_cookie(DEVICE_COOKIE, device_cookie_value(data["email"]), max_age=DEVICE_COOKIE_MAX_AGE,
                            httponly=True, samesite="Lax", secure=request._request.is_secure())
        return response

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        if request.user.is_authenticated:
            DrfSessionAuthentication().enforce_csrf(request)
            signin.session_logout(request=request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionOtpView(generics.GenericAPIView):
    """POST /session/otp {otp_token}: verify the signed-in session with a TOTP or recovery code (after a single
    sign-on without an MFA assertion). Throttled like sign-in; 401 `invalid_otp`; 400 `no_second_factor`."""

    serializer_class = s.SessionOutput
    allow_unverified_session = True
    throttle_classes = SIGN_IN_THROTTLES

    @extend_schema(request=s.OtpVerifyInput, responses={200: s.SessionOutput})
    def post(self, request):
        if not signin.sign_in_state(request).interactive:
            raise Forbidden("Only a console session verifies a code.", code="interactive_session_required")
        signin.session_verify_otp(request=request._request, **_validated(s.OtpVerifyInput, request))
        return SessionView._state(self, request)


class TwoFactorResetView(generics.GenericAPIView):
    """POST /users/{id}/reset-two-factor {reason}: staff remove a user's TOTP device and recovery codes (the user
    lost both); the reason is kept in the audit event. Staff operators only."""

    serializer_class = s.TwoFactorResetInput
    staff_actions = {"post"}

    def permission_denied(self, request, message=None, code=None):
        """A signed-in caller without the staff role (a stolen tenant token probing) is recorded as
        `second_factor.change_refused` (`attempted` `totp.reset`, `reason` `permission_denied`, the target user)
        in the caller's organizations before the 403."""
        if request.user and request.user.is_authenticated:
            signin.security_event("second_factor.change_refused", request.user,
                                  after={"attempted": "totp.reset", "reason": "permission_denied",
                                         "user": str(self.kwargs.get("pk", ""))})
        super().permission_denied(request, message=message, code=code)

    @extend_schema(request=s.TwoFactorResetInput, responses={204: None})
    def post(self, request, pk):
        signin.two_factor_reset(actor=request.user, user_id=pk, **_validated(s.TwoFactorResetInput, request))
        return Response(status=status.HTTP_204_NO_CONTENT)
