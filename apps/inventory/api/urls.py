from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("regions", views.RegionViewSet, basename="region")
router.register("zones", views.ZoneViewSet, basename="zone")
router.register("scalable-units", views.ScalableUnitViewSet, basename="scalable-unit")
router.register("racks", views.RackViewSet, basename="rack")
router.register("fabrics", views.FabricViewSet, basename="fabric")
router.register("switches", views.SwitchViewSet, basename="switch")
router.register("hosts", views.HostViewSet, basename="host")
router.register("gpus", views.GpuViewSet, basename="gpu")
router.register("hca-ports", views.HcaPortViewSet, basename="hca-port")
router.register("incidents", views.IncidentViewSet, basename="incident")
router.register("agent-commands", views.AgentCommandViewSet, basename="agent-command")
router.register("gpu-models", views.GpuModelViewSet, basename="gpu-model")

urlpatterns = [
    re_path(r"^fleet/import/?$", views.FleetImportView.as_view(), name="fleet-import"),
    re_path(r"^fleet/export/?$", views.FleetExportView.as_view(), name="fleet-export"),
    re_path(r"^agent/enroll/?$", views.AgentEnrollView.as_view(), name="agent-enroll"),
    re_path(r"^agent/heartbeat/?$", views.AgentHeartbeatView.as_view(), name="agent-heartbeat"),
    re_path(r"^agent/commands/?$", views.AgentCommandPollView.as_view(), name="agent-commands"),
    re_path(r"^agent/commands/(?P<pk>[0-9a-fA-F-]{36})/result/?$", views.AgentCommandResultView.as_view(),
            name="agent-command-result"),
    *router.urls,
]
