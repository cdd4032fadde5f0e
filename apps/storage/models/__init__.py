from .catalog import VolumeType
from .volume import Snapshot, Volume, VolumeAttachment, VolumeUsage

__all__ = ["Snapshot", "Volume", "VolumeAttachment", "VolumeType", "VolumeUsage"]
