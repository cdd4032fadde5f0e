"""`IsStaffOperator` / `IsStaffBillingAdmin` with real bearer tokens (what inventory and billing views use)."""
import pytest
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from apps.identity.models import StaffRole
from apps.identity.permissions import IsStaffBillingAdmin, IsStaffOperator
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import make_org, make_user, member, token_for


def _view(permission):
    class View(APIView):
        permission_classes = [permission]

        def get(self, request):
            return Response({"ok": True})

        def post(self, request):
            return Response({"ok": True})

    return View.as_view()


def _call(view, method, token):
    factory = APIRequestFactory()
    request = getattr(factory, method)("/x", HTTP_AUTHORIZATION=f"Bearer {token}")
    return view(request).status_code


@pytest.mark.django_db
def test_staff_roles_and_token_scope():
    operator = make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    support = make_user("support@provider.test", staff_role=StaffRole.SUPPORT)
    billing = make_user("billing@provider.test", staff_role=StaffRole.BILLING_ADMIN)
    fleet, money = _view(IsStaffOperator), _view(IsStaffBillingAdmin)
    op_write, op_read = token_for(operator, staff=True), token_for(operator, staff=True, scope="read")
    assert (_call(fleet, "get", op_write), _call(fleet, "post", op_write)) == (200, 200)
    assert (_call(fleet, "get", op_read), _call(fleet, "post", op_read)) == (200, 403)
    sup = token_for(support, staff=True)
    assert (_call(fleet, "get", sup), _call(fleet, "post", sup)) == (200, 403)
    bill = token_for(billing, staff=True)
    assert (_call(fleet, "post", bill), _call(money, "post", bill), _call(money, "post", op_write)) == (403, 200, 403)


@pytest.mark.django_db
def test_tenant_token_of_staff_user_is_not_staff():
    org = make_org("acme")
    operator = make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    member(operator, org, OrgRole.OWNER)
    tenant_token = token_for(operator, organization=org)
    assert _call(_view(IsStaffOperator), "get", tenant_token) == 404   # as for what a tenant may not see
