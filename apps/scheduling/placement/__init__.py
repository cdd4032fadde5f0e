"""Placement: filters, weighers, device choice, network topology, gang selection. See `engine`."""
from .engine import place
from .request import Candidate, HostChoice, PlacementRequest, Result, TopologyConstraint

__all__ = ["Candidate", "HostChoice", "PlacementRequest", "Result", "TopologyConstraint", "place"]
