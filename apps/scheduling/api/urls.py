from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.trailing_slash = "/?"
router.register("placement/candidates", views.PlacementCandidatesViewSet, basename="placement-candidates")
router.register("allocations", views.AllocationViewSet, basename="allocation")
urlpatterns = router.urls
