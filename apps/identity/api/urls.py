from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("service-accounts", views.ServiceAccountViewSet, basename="service-account")
router.register("me/totp", views.TotpViewSet, basename="totp")
urlpatterns = [
    re_path(r"^me/?$", views.MeView.as_view(), name="me"),
    re_path(r"^session/?$", views.SessionView.as_view(), name="session"),
    *router.urls,
]
