"""Real concurrency for regression tests: N threads, each with its own database connection (and its own API
client), released together by a barrier. Use with ``@pytest.mark.django_db(transaction=True)`` so every thread
sees the committed rows of the test and its own transactions really race in PostgreSQL."""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.db import connections
from rest_framework.test import APIClient


def run_parallel(n: int, fn: Callable[[int], Any], *, timeout: float = 120.0) -> list[Any]:
    """Call `fn(i)` for i in 0..n-1 at once in n threads; returns the results (an exception is returned, not
    raised). Each thread closes its connection when done."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout)
            results[i] = fn(i)
        except Exception as exc:  # noqa: BLE001  (the test asserts on it)
            results[i] = exc
        finally:
            connections["default"].close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results


def client_like(client: APIClient) -> APIClient:
    """A new API client with the same credentials (clients are not shared between threads)."""
    fresh = APIClient()
    fresh.credentials(**client._credentials)
    return fresh


def post_parallel(client: APIClient, path: str, bodies: list[dict], **headers) -> list:
    """POST every body at once (one thread and connection each); returns the responses in order."""
    return run_parallel(len(bodies), lambda i: client_like(client).post(path, bodies[i], format="json", **headers))


def outcome(responses) -> Counter:
    """Counter of (status, code) over responses; an exception counts as ("exception", its type)."""
    out: Counter = Counter()
    for r in responses:
        if isinstance(r, Exception):
            out[("exception", type(r).__name__)] += 1
        else:
            out[(r.status_code, r.json().get("code") if r.status_code >= 400 else None)] += 1
    return out
