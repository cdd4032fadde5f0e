from rest_framework import serializers

from apps.core.serializers import ModelSerializer, Serializer

from ..models import AuditEvent


class AuditEventOutput(ModelSerializer):
    target_name = serializers.SerializerMethodField(
        help_text="The target's name now (a host's or project's name, a user's e-mail, a quota's resource); "
                  "null when it has none, is gone, or the caller is not provider staff.")

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "actor_email", "actor_is_staff", "token_prefix", "organization",
                  "project", "action", "target_type", "target_id", "target_name", "before", "after", "request_id",
                  "source_ip"]
        read_only_fields = fields

    def get_target_name(self, obj) -> str | None:
        return self.context.get("target_names", {}).get((obj.target_type, obj.target_id))


class AuditChainBreakOutput(Serializer):
    reason = serializers.CharField(help_text="gap | prev_mismatch | event_missing | hash_mismatch | unchained")
    seq = serializers.IntegerField(allow_null=True)
    event_id = serializers.CharField()


class AuditChainReportOutput(Serializer):
    ok = serializers.BooleanField()
    checked = serializers.IntegerField(help_text="Links verified before the first break (all when ok).")
    head_seq = serializers.IntegerField(help_text="The last good link's position.")
    head_hash = serializers.CharField(help_text="The last good link's hash: compare with the SIEM's copy.")
    broken = AuditChainBreakOutput(allow_null=True)
