"""Inventory models: topology (region .. rack, fabrics, switches), hosts and their devices, incidents, agent."""
from .agent import AgentCommand, AgentCredential, EnrollmentToken
from .devices import Gpu, GpuInstance, HcaPort, Nic, VirtualFunction
from .host import Host, Incident
from .topology import Fabric, Rack, Region, ScalableUnit, SubnetManager, Switch, SwitchLink, Zone

__all__ = [
    "AgentCommand", "AgentCredential", "EnrollmentToken", "Fabric", "Gpu", "GpuInstance", "HcaPort", "Host",
    "Incident", "Nic", "Rack", "Region", "ScalableUnit", "SubnetManager", "Switch", "SwitchLink",
    "VirtualFunction", "Zone",
]
