from .breaker import ComponentIncident
from .event import HealthEvent, HealthEventImpact
from .remediation import Remediation, RemediationPolicy
from .repair import Repair, Rma

__all__ = [
    "ComponentIncident",
    "HealthEvent",
    "HealthEventImpact",
    "Remediation",
    "RemediationPolicy",
    "Repair",
    "Rma",
]
