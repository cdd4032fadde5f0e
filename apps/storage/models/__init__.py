from .catalog import VolumeType
from .volume import Snapshot, Volume, VolumeAttachment

__all__ = ["Snapshot", "Volume", "VolumeAttachment", "VolumeType"]
