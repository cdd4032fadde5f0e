"""URLconf for the single sign-on tests: the project's URLs plus the OIDC views that `gpucloud.urls` adds when
OIDC is configured (with the callback class `oidc_settings` configures)."""
from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from apps.identity.oidc import CallbackView
from gpucloud.urls import handler404, handler500  # noqa: F401
from gpucloud.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("oidc/callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
    path("oidc/authenticate/", OIDCAuthenticationRequestView.as_view(), name="oidc_authentication_init"),
]
