"""What networking plugs into other apps, registered once from `NetworkingConfig.ready`:

* tenancy's quota counters ``vpcs``, ``public_ips``, ``ib_partitions`` (`selectors.quota_counters`);
* billing's usage source ``networking.public_ip`` (`selectors.public_ip_usage`);
* the Prometheus collector of partitions-file drift (`metrics.DriftCollector`) in core's registry.
"""
from __future__ import annotations

from apps.billing.registry import register_usage_source
from apps.core.metrics import register_collector
from apps.tenancy.quotas import register_usage_counter

from . import metrics, selectors


def register() -> None:
    for resource, counter in selectors.quota_counters().items():
        register_usage_counter(resource, counter)
    register_usage_source("networking.public_ip", selectors.public_ip_usage)
    register_collector(metrics.COLLECTOR)
