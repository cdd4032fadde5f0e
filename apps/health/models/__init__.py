from .breaker import ComponentIncident
from .event import HealthEvent, HealthEventImpact
from .remediation import Remediation, RemediationPolicy

__all__ = ["ComponentIncident", "HealthEvent", "HealthEventImpact", "Remediation", "RemediationPolicy"]
