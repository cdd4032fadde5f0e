from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("flavors", views.FlavorViewSet, basename="flavor")
router.register("images", views.ImageViewSet, basename="image")
router.register("ssh-keys", views.SshKeyViewSet, basename="ssh-key")
router.register("instances", views.InstanceViewSet, basename="instance")
router.register("clusters", views.ClusterViewSet, basename="cluster")
urlpatterns = router.urls
