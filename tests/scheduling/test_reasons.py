"""A refusal's reasons in a tenant's words (`apps.scheduling.reasons.placement_reasons`): each filter that removed
hosts becomes a stable ``code`` (its name) and a plain ``message`` with the count, naming no host and nothing of
another tenant, so the console can show "74 hosts have a different GPU model" instead of "gpu_model removed 74".
"""
from __future__ import annotations

from apps.scheduling.reasons import placement_reasons


def _exp(*filters, considered=82):
    return {"hosts_considered": considered, "path": "exact", "remaining": 0,
            "filters": [{"filter": name, "removed": sum(reasons.values()), "reasons": reasons}
                        for name, reasons in filters]}


def test_each_filter_that_removed_hosts_is_a_code_and_a_plain_message():
    exp = _exp(("host_state", {}), ("gpu_model", {"no GPU of L40S-48GB": 74}),
               ("vf_capacity", {"no GPU that hands vGPUs to VMs as SR-IOV VFs has a free VF (enable VFs on the "
                                "host)": 8}))
    assert placement_reasons(exp) == [
        {"code": "gpu_model", "hosts": 74, "message": "74 hosts have a different GPU model"},
        {"code": "vf_capacity", "hosts": 8, "message": "8 hosts have no free vGPU VF"}]


def test_the_words_follow_the_count_and_the_reason():
    exp = _exp(("host_state", {"cordoned": 1}), ("tenant_isolation", {"dedicated to another project": 3}),
               ("gpu_mode", {"no GPU in mig mode": 2}), ("vcpu", {"fewer than 26 vCPUs free": 1}),
               ("memory", {"less than 65536 MiB": 2}), ("mig_geometry", {"the GPU model does not support MIG": 4}))
    assert [r["message"] for r in placement_reasons(exp)] == [
        "1 host is out of service", "3 hosts are dedicated to other customers", "2 hosts have no GPU set up for MIG slices",
        "1 host has too few free vCPUs", "2 hosts have less memory than the flavor needs",
        "4 hosts have GPUs that do not support MIG"]


def test_no_names_or_ids_of_hosts_or_other_tenants_reach_the_words():
    exp = _exp(("tenant_isolation", {"runs other projects' workloads": 2}), ("some_new_need", {"no room": 1}))
    words = placement_reasons(exp)
    assert words == [
        {"code": "tenant_isolation", "hosts": 2,
         "message": "2 hosts run other customers' work (this flavor needs a host of its own)"},
        {"code": "some_new_need", "hosts": 1, "message": "1 host: no room"}]


def test_an_empty_fleet_and_a_gang_too_large():
    assert placement_reasons(_exp(considered=0)) == [
        {"code": "no_hosts", "hosts": 0, "message": "No host of the fleet offers this"}]
    assert placement_reasons(_exp(("topology", {"only 3 suitable hosts for 4": 3}))) == [
        {"code": "topology", "hosts": 3, "message": "Only 3 suitable hosts for the 4 needed"}]
    assert placement_reasons({}) == []
