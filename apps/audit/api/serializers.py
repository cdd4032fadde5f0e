
from apps.core.serializers import ModelSerializer

from ..models import AuditEvent


class AuditEventOutput(ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "actor_email", "actor_is_staff", "token_prefix", "organization",
                  "project", "action", "target_type", "target_id", "before", "after", "request_id", "source_ip"]
        read_only_fields = fields
