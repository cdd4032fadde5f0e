"""Networking models: VPCs and their parts (Ethernet, OVN) and InfiniBand partitions (OpenSM / UFM)."""
from .ib import (
    FabricDriftEvent,
    FabricSyncState,
    IbPartition,
    IbPartitionMember,
    PkeyPool,
    VirtualGuid,
    VirtualGuidPool,
)
from .vpc import (
    IpAllocation,
    Port,
    PublicIp,
    PublicIpHolding,
    PublicIpPool,
    SecurityGroup,
    SecurityGroupRule,
    Subnet,
    Vpc,
)

__all__ = [
    "FabricDriftEvent", "FabricSyncState", "IbPartition", "IbPartitionMember", "IpAllocation", "PkeyPool", "Port", "PublicIp",
    "PublicIpHolding", "PublicIpPool", "SecurityGroup", "SecurityGroupRule", "Subnet", "VirtualGuid", "VirtualGuidPool", "Vpc",
]
