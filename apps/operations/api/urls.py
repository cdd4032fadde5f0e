from rest_framework.routers import SimpleRouter

from .views import OperationViewSet

router = SimpleRouter(trailing_slash="/?")
router.register("operations", OperationViewSet, basename="operation")
urlpatterns = router.urls
