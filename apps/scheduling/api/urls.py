from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("placement/candidates", views.PlacementCandidatesViewSet, basename="placement-candidates")
router.register("allocations", views.AllocationViewSet, basename="allocation")
urlpatterns = router.urls
