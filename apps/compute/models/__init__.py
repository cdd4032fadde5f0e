"""Compute models: flavors, images, SSH keys, instances and clusters."""
from .catalog import Flavor, Image
from .instance import Cluster, Instance, SshKey

__all__ = ["Cluster", "Flavor", "Image", "Instance", "SshKey"]
