from .breaker import ComponentIncident
from .event import HealthEvent, HealthEventImpact
from .fence import FenceDevice, HostFence
from .remediation import Remediation, RemediationPolicy
from .repair import Repair, Rma

__all__ = [
    "ComponentIncident",
    "HealthEvent",
    "FenceDevice",
    "HealthEventImpact",
    "HostFence",
    "Remediation",
    "RemediationPolicy",
    "Repair",
    "Rma",
]
