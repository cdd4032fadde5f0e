from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("service-accounts", views.ServiceAccountViewSet, basename="service-account")
router.register("me/totp", views.TotpViewSet, basename="totp")
urlpatterns = [
    re_path(r"^me/totp/?$", views.TotpViewSet.as_view({"post": "create", "delete": "remove"}), name="totp-list"),
    re_path(r"^me/?$", views.MeView.as_view(), name="me"),
    re_path(r"^session/?$", views.SessionView.as_view(), name="session"),
    re_path(r"^session/otp/?$", views.SessionOtpView.as_view(), name="session-otp"),
    re_path(r"^users/(?P<pk>[0-9a-fA-F-]{36})/reset-two-factor/?$", views.TwoFactorResetView.as_view(),
            name="user-reset-two-factor"),
    *router.urls,
]
