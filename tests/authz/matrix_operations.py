"""Authorization-matrix entries of the operations app (`GET /operations`, `GET /operations/{pk}`)."""
import uuid

from apps.operations.models import Operation

from .framework import Case, Entry, expect


def _operation(world) -> Case:
    op = Operation.objects.create(kind="test.noop", target_type="tenancy.project", target_id=uuid.uuid4(),
                                  project=world.project_a, step="done")
    return Case(kwargs={"pk": op.pk})


ENTRIES = [
    # every caller lists its own (organization B's owner sees an empty page, never A's operation)
    Entry("GET", "/api/v1/operations", expect(other_org=200), _operation),
    Entry("GET", "/api/v1/operations/{pk}", expect(), _operation),
]
