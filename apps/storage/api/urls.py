from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("volume-types", views.VolumeTypeViewSet, basename="volume-type")
router.register("volumes", views.VolumeViewSet, basename="volume")
router.register("snapshots", views.SnapshotViewSet, basename="snapshot")
urlpatterns = router.urls
