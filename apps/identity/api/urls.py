from django.urls import re_path
from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.trailing_slash = "/?"  # DRF >= 3.15 turns trailing_slash="/?" into "/": accept both spellings
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("service-accounts", views.ServiceAccountViewSet, basename="service-account")
router.register("me/totp", views.TotpViewSet, basename="totp")
urlpatterns = [
    re_path(r"^me/?$", views.MeView.as_view(), name="me"),
    re_path(r"^session/?$", views.SessionView.as_view(), name="session"),
    *router.urls,
]
