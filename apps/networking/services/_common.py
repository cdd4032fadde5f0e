"""Helpers every networking service uses: authorization, error translation, reconcile scheduling."""
from __future__ import annotations

from contextlib import contextmanager

from apps.core.errors import ValidationFailed, fields_invalid
from apps.core.tasks import enqueue_on_commit
from apps.identity.models import StaffRole
from apps.tenancy import authz
from apps.tenancy.models import ProjectRole

from ..ipam import AddressError, AddressErrors
from ..pkeys import PkeyError
from ..sg_rules import RuleError, RuleErrors

WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
NETWORK_STAFF = frozenset({StaffRole.OPERATOR})


def authorize_write(actor, project) -> None:
    """Project admin/member may change the project's networks (else 404/403; staff by a membership only)."""
    authz.authorize_project(actor, project, WRITERS)


def authorize_partition_members(actor, project) -> None:
    """An InfiniBand partition's members: project admin/member, or a staff operator (a fabric's ports and shared
    service ports are the fleet's, ADR 0704; the partition itself is the tenant's, `authorize_write`)."""
    authz.authorize_project(actor, project, WRITERS, staff_roles=NETWORK_STAFF)


def authorize_operator(actor) -> None:
    """Provider pools (P_Keys, public IPs, virtual GUIDs) are set by staff operators only."""
    authz.authorize_staff(actor, NETWORK_STAFF)


def fields_of(obj, names) -> dict:
    return {name: getattr(obj, name) for name in names}


@contextmanager
def input_errors():
    """Turn the pure modules' errors (AddressError, RuleError, PkeyError) into 400 problem+json; several at once
    (`RuleErrors`, `AddressErrors`) into one naming each field (`apps.core.errors.fields_invalid`)."""
    try:
        yield
    except (AddressErrors, RuleErrors) as exc:
        raise fields_invalid([(e.field, str(e), e.code) for e in exc.errors])
    except (AddressError, RuleError) as exc:
        raise ValidationFailed(str(exc), code=exc.code, errors={exc.field: [str(exc)]})
    except PkeyError as exc:
        raise ValidationFailed(str(exc), code=exc.code, errors={"pkey": [str(exc)]})


def schedule_ovn_reconcile() -> None:
    """Push the Ethernet desired state to OVN after this transaction commits."""
    from .. import tasks

    enqueue_on_commit(tasks.ovn_reconcile_task, queue="reconcile")


def schedule_ib_reconcile(fabric_id) -> None:
    """Push fabric `fabric_id`'s partitions to its subnet manager after this transaction commits."""
    from .. import tasks

    enqueue_on_commit(tasks.ib_fabric_reconcile_task, str(fabric_id), queue="reconcile")
