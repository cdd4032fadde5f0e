from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("placement/candidates", views.PlacementCandidatesViewSet, basename="placement-candidates")
router.register("allocations", views.AllocationViewSet, basename="allocation")
urlpatterns = [
    re_path(r"^fleet/summary/?$", views.FleetSummaryView.as_view(), name="fleet-summary"),
    *router.urls,
]
