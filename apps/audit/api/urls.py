from rest_framework.routers import SimpleRouter

from .views import AuditEventViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # DRF >= 3.15 turns trailing_slash="/?" into "/": accept both spellings
router.register("audit-events", AuditEventViewSet, basename="audit-event")
urlpatterns = router.urls
