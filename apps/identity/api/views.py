"""Identity API: /tokens, /service-accounts, /me (+ TOTP enrolment), /session (console login, CSRF)."""
from django.contrib.auth import logout
from django.middleware.csrf import get_token
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication as DrfSessionAuthentication
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from apps.core.api import validated

from .. import services
from ..selectors import api_token_list_visible_to, service_account_list_visible_to
from . import filters
from . import serializers as s

UUID_RE = "[0-9a-fA-F-]{36}"


def _validated(cls, request, context=None):
    return validated(cls(data=request.data, context=context or {"request": request}))


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """API tokens. The secret is in the create response only; DELETE revokes (the row stays)."""

    serializer_class = s.ApiTokenOutput
    filterset_class = filters.ApiTokenFilter
    lookup_value_regex = UUID_RE

    def get_queryset(self):
        return api_token_list_visible_to(self.request.user)

    @extend_schema(request=s.ApiTokenCreateInput, responses={201: s.ApiTokenCreated})
    def create(self, request):
        data = _validated(s.ApiTokenCreateInput, request)
        account = data.pop("service_account")
        row, raw = services.api_token_create(actor=request.user, user=account.user if account else None, **data)
        return Response(s.ApiTokenCreated(row, context={"raw_token": raw}).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.api_token_revoke(actor=request.user, token=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
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
    """TOTP two-factor enrolment for the caller: POST /me/totp (start), POST /me/totp/confirm (finish)."""

    serializer_class = s.TotpEnrolmentOutput
    allow_unverified_session = True

    @extend_schema(request=None, responses={201: s.TotpEnrolmentOutput})
    def create(self, request):
        device = services.totp_enrol(actor=request.user)
        return Response({"config_url": device.config_url}, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.TotpConfirmInput, responses={200: s.MeOutput})
    @action(detail=False, methods=["post"])
    def confirm(self, request):
        from django_otp import login as otp_login

        device = services.totp_confirm(actor=request.user, **_validated(s.TotpConfirmInput, request))
        if getattr(request, "auth", None) is None and hasattr(request._request, "session"):
            otp_login(request._request, device)
        return Response(s.MeOutput(request.user).data)


class SessionView(generics.GenericAPIView):
    """Console session. GET: state and CSRF token (sets the csrftoken cookie). POST: log in (CSRF checked).
    DELETE: log out."""

    serializer_class = s.SessionOutput
    permission_classes = [AllowAny]
    allow_unverified_session = True

    def _state(self, request, code=status.HTTP_200_OK):
        user = request.user
        verified = bool(getattr(user, "is_verified", lambda: False)()) or getattr(user, "otp_device", None) is not None
        return Response({"authenticated": user.is_authenticated, "email": getattr(user, "email", None) or None,
                         "two_factor_verified": verified, "csrf_token": get_token(request._request)}, status=code)

    def get(self, request):
        return self._state(request)

    @extend_schema(request=s.LoginInput, responses={200: s.SessionOutput})
    def post(self, request):
        DrfSessionAuthentication().enforce_csrf(request)
        data = _validated(s.LoginInput, request)
        services.session_login(request=request._request, **data)
        request.user = request._request.user
        return self._state(request)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        if request.user.is_authenticated:
            DrfSessionAuthentication().enforce_csrf(request)
            logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)
