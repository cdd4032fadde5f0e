"""Database contention and constraint errors, answered in one place.

Lock order (docs/architecture.md, "Lock order"; ADR 0003): every transaction takes row locks in this order and
never goes back up the list::

    idempotency key (its `core.IdempotencyKey` row) → organization (quota) → the object's own row (lease, instance, operation, cluster)
    → per-host ledger rows (host id order) → GPU / pool rows → advisory per-model reserve lock
    → (at commit, after every other deferred check) the audit chain's advisory lock (ADR 0111)

Locks on a joined row are a bug: ``select_for_update()`` with ``select_related()`` must pass ``of=("self",)``, or
PostgreSQL locks the project and organization rows too (FOR UPDATE), which blocks the FOR KEY SHARE lock every
insert referencing them takes at commit.

Two tools:

* `atomic_with_retry` (decorator): runs the function in its own transaction and runs it again, from the start,
  when PostgreSQL aborted the transaction for a deadlock (SQLSTATE 40P01) or a serialization failure (40001),
  with jittered exponential backoff (tenacity), up to `CONTENTION_ATTEMPTS` times. Called inside an outer
  transaction it does not retry (the outer transaction is already aborted; its owner must retry).
* `unique_conflict(detail, code=...)` (context manager): the insert or update inside it runs in a savepoint and
  a unique violation (23505) becomes 409 `code` with `detail`, so a create that lost a race to an identical one
  answers exactly like the sequential duplicate.

What escapes both is still never a 500: the API's exception handler maps contention to 503 `contention` (with
``Retry-After``) and any other unique violation to 409 `already_exists` (`problem_for_database_error`).
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import tenacity
from django.db import DatabaseError, IntegrityError, connection, transaction

from .errors import Conflict, DomainError

log = logging.getLogger("gpucloud.db")

DEADLOCK = "40P01"
SERIALIZATION_FAILURE = "40001"
UNIQUE_VIOLATION = "23505"
CONTENTION_SQLSTATES = frozenset({DEADLOCK, SERIALIZATION_FAILURE})
CONTENTION_ATTEMPTS = 5

F = TypeVar("F", bound=Callable[..., Any])


class Contention(DomainError):
    """503: the database gave up on the transaction because of concurrent ones; the request changed nothing and
    may be sent again (``Retry-After: 1``)."""

    code, status, title = "contention", 503, "Busy, retry"


def sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE behind a Django database error (psycopg's error is its ``__cause__``)."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    return getattr(cause, "sqlstate", None)


def is_contention(exc: BaseException) -> bool:
    return isinstance(exc, DatabaseError) and sqlstate(exc) in CONTENTION_SQLSTATES


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("db_contention_retry", extra={"attempt": state.attempt_number, "sqlstate": sqlstate(exc),
                                              "function": getattr(state.fn, "__qualname__", "")})


def atomic_with_retry(fn: F) -> F:
    """Decorator: run `fn` in `transaction.atomic()`; on deadlock or serialization failure roll back and run it
    again (up to `CONTENTION_ATTEMPTS` tries, 10-400 ms jittered backoff). When every try lost, raise 503
    `contention`. Inside an outer transaction: one try, errors propagate unchanged. `fn` must keep all its
    effects inside the transaction (tasks through `enqueue_on_commit`), so a rolled-back try leaves nothing."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if connection.in_atomic_block:
            with transaction.atomic():
                return fn(*args, **kwargs)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_contention),
            stop=tenacity.stop_after_attempt(CONTENTION_ATTEMPTS),
            wait=tenacity.wait_random_exponential(multiplier=0.01, max=0.4),
            before_sleep=_log_retry, reraise=True)
        try:
            for attempt in retrying:
                with attempt, transaction.atomic():
                    result = fn(*args, **kwargs)
        except DatabaseError as exc:
            if is_contention(exc):
                raise Contention("The request met concurrent changes and was not applied; send it again.",
                                 retry_after=1) from exc
            raise
        return result

    return wrapper  # type: ignore[return-value]


@contextmanager
def unique_conflict(detail: str, *, code: str, **extra: Any) -> Iterator[None]:
    """Run the write inside in a savepoint; a unique violation becomes 409 `code` (extra members as given).
    Other integrity errors (foreign key, check) propagate."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if sqlstate(exc) == UNIQUE_VIOLATION:
            raise Conflict(detail, code=code, **extra) from exc
        raise


def problem_for_database_error(exc: BaseException) -> DomainError | None:
    """The last-resort answer for a database error no service turned into a domain error: 503 `contention` for
    a deadlock or serialization failure, 409 `already_exists` for a unique violation; None otherwise."""
    if is_contention(exc):
        return Contention("The request met concurrent changes and was not applied; send it again.",
                          retry_after=1)
    if isinstance(exc, IntegrityError) and sqlstate(exc) == UNIQUE_VIOLATION:
        return Conflict("An object with these values already exists.", code="already_exists")
    return None


class _RollBack(Exception):
    pass


@contextmanager
def rolled_back() -> Iterator[None]:
    """Run the block in a transaction (a savepoint inside an outer one) that is always rolled back: a dry run
    (launch checks, a lease's trial claim) can call the very services a write uses and leave no row behind.
    Exceptions of the block propagate after the rollback."""
    try:
        with transaction.atomic():
            yield
            raise _RollBack
    except _RollBack:
        pass


def advisory_xact_lock(key: str) -> None:
    """Take PostgreSQL's transaction-level advisory lock named by `key` (hashed with ``hashtextextended``), held
    until the surrounding transaction ends: serializes choices no row can lock (the lowest free VLAN id, a GUID
    not yet inserted, a model's reserve). Call inside ``transaction.atomic()``."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
