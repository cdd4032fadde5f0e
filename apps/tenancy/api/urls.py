from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("organizations", views.OrganizationViewSet, basename="organization")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("memberships", views.MembershipViewSet, basename="membership")
router.register("invitations", views.InvitationViewSet, basename="invitation")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("signup", views.SignupViewSet, basename="signup")
urlpatterns = router.urls
