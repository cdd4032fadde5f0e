from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("bare-metal/nodes", views.NodeViewSet, basename="baremetal-node")
router.register("bare-metal/exit-receipts", views.ReceiptViewSet, basename="baremetal-receipt")
urlpatterns = [re_path(r"^bare-metal/receipt-key/?$", views.ReceiptKeyView.as_view(), name="baremetal-receipt-key"),
               *router.urls]
