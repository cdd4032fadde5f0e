from .ingest import health_event_ingest, health_event_preview

__all__ = ["health_event_ingest", "health_event_preview"]
