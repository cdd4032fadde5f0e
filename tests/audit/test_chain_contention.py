"""The audit hash chain's lock (ADR 0111) never closes a lock cycle with the row locks of ADR 0003.

Found under parallel creates: the chain was linked by a deferred trigger, and PostgreSQL runs deferred triggers
at commit in the order they were queued, so the chain's advisory lock was taken at the transaction's first audit
event and held while the deferred foreign-key checks of rows written after that event still ran. Such a check
takes `FOR KEY SHARE` on the referenced row; when another transaction held that row `FOR UPDATE` (a subnet
create locks its VPC) and was itself committing, it waited for the chain lock: "deadlock detected", one of the
two aborted. Now the chain is linked after every other deferred check of the transaction (a second deferred
stage), so the lock is held only by a transaction that waits for nothing else."""
import threading
import time

import pytest
from django.db import connection, connections, transaction

from apps.audit.models import AuditChainLink, AuditEvent
from apps.audit.selectors import audit_chain_verify
from apps.networking import services as net
from apps.networking.models import Port, Subnet

pytestmark = pytest.mark.django_db(transaction=True)


def _deadlocks() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cur.fetchone()[0]


def test_a_commit_that_links_the_chain_never_deadlocks_with_a_row_lock_holder(world):
    """Transaction A writes an audit event (a port in VPC one) and then a row referencing VPC two (a second port);
    transaction B, a subnet create in VPC two, holds VPC two `FOR UPDATE` and commits while A is committing.
    Before: A took the chain lock, then waited for VPC two; B waited for the chain lock; PostgreSQL aborted one.
    Now both commit and the chain verifies."""
    p = world.project_a
    one = net.vpc_create(actor=None, project=p, name="one", cidr="10.1.0.0/16")
    two = net.vpc_create(actor=None, project=p, name="two", cidr="10.2.0.0/16")
    s1 = net.subnet_create(actor=None, vpc=one, name="a", cidr="10.1.1.0/24")
    s2 = net.subnet_create(actor=None, vpc=two, name="a", cidr="10.2.1.0/24")
    before_events, before_deadlocks = AuditEvent.objects.count(), _deadlocks()
    b_holds_the_vpc, a_commits = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def b():
        try:
            with transaction.atomic():
                net.subnet_create(actor=None, vpc=two, name="b", cidr="10.2.2.0/24")  # VPC two FOR UPDATE
                b_holds_the_vpc.set()
                a_commits.wait(10)
                time.sleep(0.5)  # A is inside its commit, waiting for VPC two
        except BaseException as exc:  # noqa: BLE001  (asserted below)
            errors.append(exc)
        finally:
            connections["default"].close()

    def a():
        try:
            b_holds_the_vpc.wait(10)
            with transaction.atomic():
                net.port_create(actor=None, subnet=s1, name="nic0")
                net.port_create(actor=None, subnet=s2, name="nic1")
                a_commits.set()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections["default"].close()

    threads = [threading.Thread(target=b), threading.Thread(target=a)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert Port.objects.filter(name__in=["nic0", "nic1"]).count() == 2
    assert Subnet.objects.filter(vpc=two, name="b").exists()
    assert AuditEvent.objects.count() == before_events + 3
    report = audit_chain_verify()
    assert report.broken is None and AuditChainLink.objects.count() == AuditEvent.objects.count()
    time.sleep(1.2)  # statistics are flushed at most once a second
    assert _deadlocks() == before_deadlocks
