"""The receipt's automated-cleaning step is what Ironic's node history shows after the undeploy, never the end
state alone (`receipts.cleaning_evidence`); the real-Ironic counterpart is in test_ironic_product.py."""
from __future__ import annotations

import pytest

from apps.baremetal.drivers.base import Node, NodeEvent, NodeState
from apps.baremetal.drivers.base import ProvisionState as P
from apps.baremetal.models import BaremetalNode
from apps.baremetal.services.receipts import cleaning_evidence, history_mark

STEP = "{'step': 'erase_devices_metadata', 'priority': 99, 'interface': 'deploy'}"


def ev(n: int, event_type: str, event: str = "", severity: str = "INFO") -> NodeEvent:
    return NodeEvent(id=f"e{n}", created_at=f"2026-01-01T00:00:{n:02d}+00:00", event_type=event_type,
                     severity=severity, event=event)


DEPLOYED = [ev(1, "deployment_start"), ev(2, "deployment_end")]
CLEANED = [ev(3, "automated_cleaning_start", f"Starting automated cleaning with steps=[{STEP}]"),
           ev(4, "automated_cleaning_end", "Automated Cleaning completed successfully with steps=[]")]
MARK = history_mark(DEPLOYED)


def evidence(events, automated_clean=True, provision=P.AVAILABLE, mark=MARK, driver="redfish", last_error=""):
    seen = Node(id="n", name="n", driver=driver, automated_clean=automated_clean,
                state=NodeState(provision=provision, last_error=last_error))
    return cleaning_evidence(node=BaremetalNode(driver=driver), seen=seen, events=events, mark=mark)


def test_a_cleaning_ironic_recorded_after_the_undeploy_is_executed_with_its_steps_and_times():
    got = evidence(DEPLOYED + CLEANED)
    assert (got["result"], got["how"], got["steps"]) == ("succeeded", "executed", ["deploy.erase_devices_metadata"])
    assert (got["started_at"], got["finished_at"]) == (CLEANED[0].created_at, CLEANED[1].created_at)
    assert evidence(DEPLOYED + CLEANED, driver="fake-hardware")["how"] == "simulated by fake-hardware"


def test_a_cleaning_before_the_undeploy_is_not_this_tenants():
    older = [ev(0, "automated_cleaning_start", "steps=[]"), ev(0, "automated_cleaning_end", "steps=[]")]
    got = evidence(older + DEPLOYED, automated_clean=None)
    assert (got["result"], got["how"]) == ("not_run", "skipped: automated cleaning is disabled in Ironic's "
                                                      "configuration and not requested for this node")
    # an undeploy started before the mark was kept: what follows the instance's last deployment counts
    assert evidence(older + DEPLOYED, automated_clean=None, mark=None)["result"] == "not_run"
    assert evidence(older + DEPLOYED + CLEANED, mark=None)["result"] == "succeeded"


@pytest.mark.parametrize(("events", "automated_clean", "result", "how"), [
    (DEPLOYED, False, "not_run", "skipped: automated cleaning is disabled for this node"),
    (None, True, "unknown", "unverified: the provisioning service keeps no node history (Ironic API 1.78)"),
    ([], True, "unknown", "unverified: Ironic recorded no cleaning for this node "
                          "([conductor]record_step_flows_in_history is off?)"),
    (DEPLOYED + CLEANED[:1], True, "unknown",
     "unverified: Ironic recorded the start of automated cleaning but not its end"),
])
def test_no_cleaning_is_claimed_without_ironics_record(events, automated_clean, result, how):
    got = evidence(events, automated_clean=automated_clean)
    assert (got["result"], got["how"], got["finished_at"]) == (result, how, None)


def test_a_failed_cleaning_names_ironics_error():
    aborted = [CLEANED[0], ev(4, "automated_cleaning_end", "Automated Cleaning aborted at step "
                              f"'erase_devices_metadata' with steps=[{STEP}]", severity="ERROR")]
    got = evidence(DEPLOYED + aborted, provision=P.CLEAN_FAILED, last_error="disk erase failed")
    assert (got["result"], got["how"], got["detail"]) == ("failed", "executed", "disk erase failed")
    got = evidence(DEPLOYED, provision=P.CLEAN_FAILED, last_error="power validation failed")  # before any step
    assert (got["result"], got["detail"]) == ("failed", "power validation failed")
