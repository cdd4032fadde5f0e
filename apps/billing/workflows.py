"""The invoice run as an operation (`billing.invoice_run`), for runs requested through the API.

Steps (apps.operations.workflows): `prepare` collects closed usage and downtime and lists the organizations to
invoice in `op.state`; `invoice` handles one batch of BILLING_RUN_BATCH_SIZE organizations per run of the step (the
batch and its place in the list commit together, then the step returns AGAIN), so a killed worker loses at most
the batch in flight and the run resumes at the next one; `complete` lists held drafts, marks the run completed and
audits it. A failed operation (deadline, terminal error) marks the run failed. Every step is as safe to repeat as
the synchronous run (`services.invoicing.invoice_run_execute`): finalized invoices are never touched again.
"""
from __future__ import annotations

from apps.operations import workflows as wf

from . import conf
from .models import InvoiceRun
from .services import invoicing
from .states import RunStatus

INVOICE_RUN = "billing.invoice_run"


def _run(op) -> InvoiceRun:
    return InvoiceRun.objects.select_for_update().get(pk=op.target_id)


def prepare(op) -> None:
    run = _run(op)
    org_ids = invoicing.invoice_run_prepare(run, actor=op.actor)
    op.state = {"organizations": [str(o) for o in org_ids], "next": 0, "batch": 0}
    InvoiceRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)


def invoice(op):
    orgs, start = op.state["organizations"], op.state["next"]
    size = conf.get("BILLING_RUN_BATCH_SIZE")
    if start < len(orgs):
        invoicing.invoice_run_batch(_run(op), orgs[start:start + size], op.state["batch"])
        op.state["next"], op.state["batch"] = start + size, op.state["batch"] + 1
    return wf.AGAIN if op.state["next"] < len(orgs) else None


def complete(op) -> None:
    invoicing.invoice_run_complete(_run(op), actor=op.actor)


def _on_error(op, code: str, detail: str) -> None:
    invoicing.invoice_run_fail(op.target_id, f"{code}: {detail}")


wf.register(wf.Workflow(kind=INVOICE_RUN, steps=(("prepare", prepare), ("invoice", invoice), ("complete", complete)),
                        on_error=_on_error, queue="billing", deadline_seconds=6 * 3600.0))
