"""Compute models: flavors, images, SSH keys, instances and clusters."""
from .catalog import Flavor, Image
from .instance import Cluster, Instance, InstanceFlavorChange, SshKey

__all__ = ["Cluster", "Flavor", "Image", "Instance", "InstanceFlavorChange", "SshKey"]
