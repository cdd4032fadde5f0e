from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "apps.audit"
    label = "audit"

    def ready(self):
        from apps.core.errors import request_refused

        from .receivers import record_refusal

        request_refused.connect(record_refusal, dispatch_uid="audit.record_refusal")
