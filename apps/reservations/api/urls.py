from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("leases", views.LeaseViewSet, basename="lease")
router.register("capacity", views.CapacityViewSet, basename="capacity")
router.register("queued-requests", views.QueuedRequestViewSet, basename="queued-request")
router.register("instance-requests", views.InstanceRequestViewSet, basename="instance-request")
router.register("webhooks", views.WebhookEndpointViewSet, basename="webhook")
router.register("capacity-reserves", views.OnDemandReserveViewSet, basename="capacity-reserve")
router.register("queue-priorities", views.QueuePriorityViewSet, basename="queue-priority")
urlpatterns = [
    re_path(r"^instances/(?P<pk>[0-9a-fA-F-]{36})/capacity/?$",
            views.InstanceCapacityViewSet.as_view({"get": "retrieve"}), name="instance-capacity"),
    *router.urls,
]
