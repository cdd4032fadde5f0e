"""One reconcile per backend at a time: a second run waits for the row lock the first holds (real PostgreSQL)."""
import threading

import pytest
from django.db import connection

from apps.networking.models import FabricSyncState
from apps.networking.services.reconcile import _exclusive


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("existing", [True, False], ids=["state-row-exists", "first-run"])
def test_a_second_reconcile_of_the_same_backend_waits_for_the_first(existing):
    if existing:
        FabricSyncState.objects.create(key="ovn")
    order: list[str] = []
    first_in, release = threading.Event(), threading.Event()

    def first():
        try:
            with _exclusive("ovn"):
                order.append("first in")
                first_in.set()
                release.wait(10)
                order.append("first out")
        finally:
            connection.close()

    def second():
        try:
            first_in.wait(10)
            with _exclusive("ovn"):
                order.append("second in")
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    first_in.wait(10)
    threads[1].join(0.5)  # the second run is blocked on the lock while the first holds it
    assert threads[1].is_alive() and order == ["first in"]
    release.set()
    for t in threads:
        t.join(10)
    assert order == ["first in", "first out", "second in"]
    assert FabricSyncState.objects.filter(key="ovn").count() == 1  # created once, by whichever came first
