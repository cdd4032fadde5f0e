from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.trailing_slash = "/?"
router.register("vpcs", views.VpcViewSet, basename="vpc")
router.register("subnets", views.SubnetViewSet, basename="subnet")
router.register("security-groups", views.SecurityGroupViewSet, basename="security-group")
router.register("security-group-rules", views.SecurityGroupRuleViewSet, basename="security-group-rule")
router.register("ports", views.PortViewSet, basename="port")
router.register("public-ips", views.PublicIpViewSet, basename="public-ip")
router.register("public-ip-pools", views.PublicIpPoolViewSet, basename="public-ip-pool")
router.register("ib-partitions", views.IbPartitionViewSet, basename="ib-partition")
router.register("pkey-pools", views.PkeyPoolViewSet, basename="pkey-pool")
router.register("virtual-guid-pools", views.VirtualGuidPoolViewSet, basename="virtual-guid-pool")
urlpatterns = router.urls
