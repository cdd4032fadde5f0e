"""URL map: operational endpoints, then /api/v1/ with each app's routes, the schema and the docs; last, the web
console (apps.core.console) on every other path."""
from django.conf import settings
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.core import console as console_views
from apps.core import views as core_views
from apps.identity import views as identity_views
from apps.tenancy import views as tenancy_views

api_v1 = [
    path("", include("apps.operations.api.urls")),
    path("", include("apps.audit.api.urls")),
    path("", include("apps.identity.api.urls")),
    path("", include("apps.tenancy.api.urls")),
    path("", include("apps.inventory.api.urls")),
    path("", include("apps.scheduling.api.urls")),
    path("", include("apps.compute.api.urls")),
    path("", include("apps.baremetal.api.urls")),
    path("", include("apps.networking.api.urls")),
    path("", include("apps.storage.api.urls")),
    path("", include("apps.billing.api.urls")),
    path("", include("apps.reservations.api.urls")),
    path("", include("apps.health.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
]

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("metrics", core_views.metrics, name="metrics"),
    path("api/v1/", include(api_v1)),
    path("sign-in/failed", identity_views.sign_in_failed, name="sign-in-failed"),
    path("invitations/accept", tenancy_views.invitation_accept_page, name="invitation-accept-page"),
    path("signup/verify", tenancy_views.signup_verify_page, name="signup-verify-page"),
]

if getattr(settings, "OIDC_ENABLED", False):  # OIDC login, off unless configured (apps/identity/oidc_config.py)
    urlpatterns.append(path("oidc/", include("apps.identity.oidc_urls")))

# The web console (frontend/, built by `make console`): its files, and index.html for its client routes.
urlpatterns.append(re_path(console_views.ROUTE, console_views.console, name="console"))

handler400 = "apps.core.handlers.bad_request"
handler403 = "apps.core.handlers.permission_denied"
handler404 = "apps.core.handlers.not_found"
handler500 = "apps.core.handlers.server_error"
