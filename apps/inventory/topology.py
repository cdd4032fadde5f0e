"""Network topology reads for placement: which leaf switches a host's ports reach and how far two hosts are.

Distance (DOMAIN.md "Fleet"): the switch hops the hosts' ports need on one fabric — 0 same host, 1 same leaf
(on a rail-optimised fabric: every rail's leaf is shared), 2 leaves joined by a common spine, 3 beyond (core),
None when either host has no port on the fabric.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Q

from .models import HcaPort, Nic, SwitchLink


@dataclass(frozen=True)
class FabricTopology:
    """`leaves[host_id]` = set of leaf switch ids; `spines[leaf_id]` = set of switch ids one link above it."""

    leaves: dict
    spines: dict

    def distance(self, host_a, host_b) -> int | None:
        if host_a == host_b:
            return 0
        la, lb = self.leaves.get(host_a), self.leaves.get(host_b)
        if not la or not lb:
            return None
        if la & lb:
            return 1
        up_a = set().union(*(self.spines.get(leaf, set()) for leaf in la))
        up_b = set().union(*(self.spines.get(leaf, set()) for leaf in lb))
        return 2 if up_a & up_b else 3


def fabric_topology(fabric_id) -> FabricTopology:
    """Load one fabric's host->leaf and leaf->spine maps (three queries)."""
    leaves: dict = defaultdict(set)
    for host_id, leaf_id in HcaPort.objects.filter(fabric_id=fabric_id, leaf_switch__isnull=False).values_list(
            "host_id", "leaf_switch_id"):
        leaves[host_id].add(leaf_id)
    for host_id, switch_id in Nic.objects.filter(fabric_id=fabric_id, switch__isnull=False).values_list(
            "host_id", "switch_id"):
        leaves[host_id].add(switch_id)
    spines: dict = defaultdict(set)
    links = SwitchLink.objects.filter(Q(a_switch__fabric_id=fabric_id) | Q(b_switch__fabric_id=fabric_id))
    for a, a_role, b, b_role in links.values_list("a_switch_id", "a_switch__role", "b_switch_id", "b_switch__role"):
        if a_role == "leaf" and b_role != "leaf":
            spines[a].add(b)
        if b_role == "leaf" and a_role != "leaf":
            spines[b].add(a)
    return FabricTopology(leaves=dict(leaves), spines=dict(spines))
