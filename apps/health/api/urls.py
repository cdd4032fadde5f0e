from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("health-events", views.HealthEventViewSet, basename="health-event")
router.register("remediations", views.RemediationViewSet, basename="remediation")
router.register("health/breakers", views.BreakerViewSet, basename="health-breaker")
router.register("health/repairs", views.RepairViewSet, basename="health-repair")
router.register("health/fences", views.FenceViewSet, basename="health-fence")
router.register("health/rmas", views.RmaViewSet, basename="health-rma")
router.register("health/events", views.StaffHealthEventViewSet, basename="health-staff-event")

urlpatterns = [
    re_path(r"^agent/health-events/?$", views.AgentHealthEventView.as_view(), name="agent-health-events"),
    re_path(r"^health/classification/?$", views.ClassificationView.as_view(), name="health-classification"),
    re_path(r"^health/preview/?$", views.HealthPreviewView.as_view(), name="health-preview"),
    re_path(
        r"^health/hosts/(?P<host_id>[0-9a-fA-F-]{36})/workloads/?$",
        views.HostWorkloadsView.as_view(),
        name="health-host-workloads",
    ),
    re_path(
        r"^projects/(?P<project_id>[0-9a-fA-F-]{36})/remediation-policy/?$",
        views.RemediationPolicyView.as_view(),
        name="remediation-policy",
    ),
    *router.urls,
]
