"""URLconf for the single sign-on tests: the project's URLs plus the OIDC routes that `gpucloud.urls` adds when
OIDC is configured (`apps.identity.oidc_urls`)."""
from django.urls import include, path

from gpucloud.urls import handler404, handler500  # noqa: F401
from gpucloud.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("oidc/", include("apps.identity.oidc_urls")),
]
