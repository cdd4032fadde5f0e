"""Placement: filters, weighers, device choice, network topology, gang selection. See `engine`."""
from .engine import place
from .needs import HostFilterResult, register_host_filter
from .request import Candidate, HostChoice, HostNeed, PlacementRequest, Result, TopologyConstraint
from .topology import host_topology, set_refusal

__all__ = ["Candidate", "HostChoice", "HostFilterResult", "HostNeed", "PlacementRequest", "Result",
           "TopologyConstraint", "host_topology", "place", "register_host_filter", "set_refusal"]
