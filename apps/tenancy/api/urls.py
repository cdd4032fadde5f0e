from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.trailing_slash = "/?"  # DRF >= 3.15 turns trailing_slash="/?" into "/": accept both spellings
router.register("organizations", views.OrganizationViewSet, basename="organization")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("memberships", views.MembershipViewSet, basename="membership")
router.register("invitations", views.InvitationViewSet, basename="invitation")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("signup", views.SignupViewSet, basename="signup")
urlpatterns = router.urls
