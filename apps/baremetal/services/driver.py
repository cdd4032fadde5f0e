"""The bare-metal driver this process uses: `settings.DRIVERS["baremetal"]` ("module:Class"; default the Ironic
driver at `BAREMETAL_IRONIC_ENDPOINT`), built once per process and shared by every task (one SDK connection), and
`baremetal_service_require`, which refuses new bare-metal work while the provisioning service does not answer."""
from __future__ import annotations

import threading
import time

from apps.core.drivers import load_driver
from apps.core.errors import ServiceUnavailable

from .. import conf

DEFAULT = "apps.baremetal.drivers.ironic:IronicDriver"
_lock = threading.Lock()
_driver: list = []
_seen_up: list[float] = []  # monotonic time the service last answered (in this process)
UP_FOR_S = 30.0  # an answer is trusted this long, so a burst of requests probes once
RETRY_AFTER_S = 5


def baremetal_driver():
    with _lock:
        if not _driver:
            from django.conf import settings

            path = getattr(settings, "DRIVERS", {}).get("baremetal", DEFAULT)
            kwargs = {"endpoint": conf.ironic_endpoint()} if path == DEFAULT else {}
            _driver.append(load_driver("baremetal", DEFAULT, **kwargs))
        return _driver[0]


def baremetal_service_require() -> None:
    """Raise 503 `baremetal_unavailable` (`Retry-After: 5`) when the provisioning service (Ironic) does not answer:
    while `make run` is still starting it, or when it is down. New bare-metal work (enroll, recover, an instance of
    a bare-metal flavor) is refused rather than accepted for a service that cannot run it; work already accepted
    is retried by its operation (a delete is never refused here)."""
    if _seen_up and time.monotonic() - _seen_up[-1] < UP_FOR_S:
        return
    if not baremetal_driver().available():
        raise ServiceUnavailable("The bare-metal provisioning service (Ironic) is not answering yet; try again "
                                 "shortly.", code="baremetal_unavailable", retry_after=RETRY_AFTER_S)
    _seen_up[:] = [time.monotonic()]


def forget_driver() -> None:
    with _lock:
        _driver.clear()
        _seen_up.clear()
