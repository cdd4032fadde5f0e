"""The single sign-on routes under `/oidc/`, included by `gpucloud.urls` only when OIDC is configured:
`authenticate/` (mozilla-django-oidc's start, PKCE; `?next=` a local path to return to), `callback/`
(`apps.identity.oidc.CallbackView`) and `logout/` (`apps.identity.oidc.LogoutView`: POST, audited as
`session.logout` like `DELETE /api/v1/session`)."""
from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from .oidc import CallbackView, LogoutView

urlpatterns = [
    path("callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
    path("authenticate/", OIDCAuthenticationRequestView.as_view(), name="oidc_authentication_init"),
    path("logout/", LogoutView.as_view(), name="oidc_logout"),
]
