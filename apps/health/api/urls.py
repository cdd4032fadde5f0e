from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("health-events", views.HealthEventViewSet, basename="health-event")

urlpatterns = [
    re_path(r"^agent/health-events/?$", views.AgentHealthEventView.as_view(), name="agent-health-events"),
    re_path(r"^health/classification/?$", views.ClassificationView.as_view(), name="health-classification"),
    re_path(r"^health/preview/?$", views.HealthPreviewView.as_view(), name="health-preview"),
    *router.urls,
]
