"""transition(): compare-and-set under a race, and the 409 that lists allowed states."""
import threading

import pytest
from django.db import connection

from apps.core.errors import InvalidState
from apps.core.transitions import transition
from apps.operations.models import Operation

TABLE = {
    "start": ({"pending"}, "running"),
    "cancel": ({"pending", "running"}, "cancelled"),
}


def _op(**kw) -> Operation:
    import uuid

    return Operation.objects.create(kind="test", target_type="test.thing", target_id=uuid.uuid4(), **kw)


@pytest.mark.django_db
def test_transition_moves_state_and_rejects_wrong_state():
    op = _op()
    assert transition(op, "start", TABLE) == "pending"
    op.refresh_from_db()
    assert op.status == "running"
    with pytest.raises(InvalidState) as err:
        transition(op, "start", TABLE)
    assert err.value.status == 409
    assert err.value.extra["allowed_states"] == ["pending"]
    assert err.value.extra["current_state"] == "running"


@pytest.mark.django_db(transaction=True)
def test_two_threads_race_exactly_one_wins():
    op = _op()
    barrier = threading.Barrier(2)
    results: list[str] = []

    def worker(action: str) -> None:
        try:
            barrier.wait()
            copy = Operation.objects.get(pk=op.pk)
            try:
                transition(copy, action, TABLE)
                results.append(f"won:{action}")
            except InvalidState:
                results.append(f"lost:{action}")
        finally:
            connection.close()

    # both want to leave "pending": start -> running, cancel -> cancelled; whichever commits first wins the
    # "start" race; run two "start"s so exactly one can succeed.
    threads = [threading.Thread(target=worker, args=("start",)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["lost:start", "won:start"]
    op.refresh_from_db()
    assert op.status == "running"


def test_a_refused_transition_says_why_in_words():
    from apps.core.transitions import refusal_text

    assert refusal_text("host", "mark_available", "available", {"faulty", "maintenance"}, "available") == (
        "The host is already available.")
    assert refusal_text("instance", "stop", "shut_off", {"active"}, "stopping") == (
        "An instance that is shut off cannot stop: only one that is active can.")
    assert refusal_text("host", "cordon", "faulty", {"available", "draining"}, "cordoned") == (
        "A host that is faulty cannot cordon: only one that is available or draining can.")
