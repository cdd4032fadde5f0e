
from apps.core.serializers import ModelSerializer

from ..models import Operation


class OperationOutput(ModelSerializer):
    class Meta:
        model = Operation
        fields = ["id", "kind", "target_type", "target_id", "project", "status", "step", "steps_done", "attempts",
                  "error_code", "error_detail", "error_extra", "request_id", "created_at", "updated_at", "finished_at"]
        read_only_fields = fields
