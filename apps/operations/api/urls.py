from apps.core.routers import ApiRouter

from .views import OperationViewSet

router = ApiRouter()
router.register("operations", OperationViewSet, basename="operation")
urlpatterns = router.urls
