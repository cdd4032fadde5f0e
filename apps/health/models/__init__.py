from .event import HealthEvent, HealthEventImpact

__all__ = ["HealthEvent", "HealthEventImpact"]
