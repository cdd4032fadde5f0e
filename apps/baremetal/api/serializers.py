"""Bare-metal API shapes. BMC credentials are write-only: no output serializer has them."""
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.inventory.selectors import host_list_visible_to
from apps.operations.api.serializers import OperationOutput

from ..models import BaremetalNode, ExitReceipt
from ..services.nodes import HARDWARE_TYPES


class NodeEnrollInput(Serializer):
    host = VisibleField(host_list_visible_to, help_text="an inventory host whose provisioning_kind is baremetal")
    driver = serializers.ChoiceField(choices=HARDWARE_TYPES, help_text="Ironic hardware type")
    bmc_address = serializers.CharField(max_length=255, required=False, default="", allow_blank=True,
                                        help_text="Redfish: https://<bmc>; IPMI: the BMC's address")
    bmc_system_id = serializers.CharField(max_length=255, required=False, default="", allow_blank=True,
                                          help_text="Redfish system path, default /redfish/v1/Systems/1")
    bmc_username = serializers.CharField(max_length=255, required=False, default="", allow_blank=True,
                                         write_only=True)
    bmc_password = serializers.CharField(max_length=1024, required=False, default="", allow_blank=True,
                                         write_only=True, trim_whitespace=False,
                                         help_text="kept encrypted at rest; never returned")


class NodeOutput(ModelSerializer):
    host = serializers.UUIDField(source="host_id", read_only=True)
    host_name = serializers.CharField(source="host.name", read_only=True)
    has_bmc_credentials = serializers.SerializerMethodField()

    class Meta:
        model = BaremetalNode
        fields = ["id", "host", "host_name", "ironic_id", "driver", "bmc_address", "bmc_system_id",
                  "has_bmc_credentials", "provision_state", "power_state", "maintenance", "maintenance_reason",
                  "last_error", "held_reason", "inspection", "observed_at", "created_at", "updated_at"]
        read_only_fields = fields

    def get_has_bmc_credentials(self, obj) -> bool:
        return bool(obj.bmc_credentials_encrypted)


class NodeAccepted(Serializer):
    node = NodeOutput()
    operation = OperationOutput()


class ReceiptOutput(ModelSerializer):
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    project = serializers.UUIDField(source="project_id", read_only=True)
    document = serializers.SerializerMethodField(help_text="the payload, parsed")

    class Meta:
        model = ExitReceipt
        fields = ["id", "instance", "project", "key_id", "payload", "signature", "document", "created_at"]
        read_only_fields = fields

    def get_document(self, obj) -> dict:
        import json

        return json.loads(obj.payload)


class ReceiptKeyOutput(Serializer):
    algorithm = serializers.CharField()
    key_id = serializers.CharField()
    public_key = serializers.CharField(help_text="urlsafe base64 of the raw 32-byte Ed25519 public key")
    public_key_pem = serializers.CharField(help_text="SubjectPublicKeyInfo PEM (openssl pkeyutl -verify)")
