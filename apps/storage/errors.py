"""Storage error codes (stable, snake_case); the exceptions are `apps.core.errors`' (400, 404, 409, 422)."""
import enum


class Code(enum.StrEnum):
    NAME_TAKEN = "name_taken"
    SIZE_MUST_GROW = "size_must_grow"
    SNAPSHOT_IN_USE = "snapshot_in_use"
    VOLUME_IN_USE = "volume_in_use"
    ATTACHMENT_LIMIT_REACHED = "attachment_limit_reached"
    ALREADY_ATTACHED = "already_attached"
    NOT_ATTACHED = "not_attached"
    HOST_MISMATCH = "host_mismatch"
    ZONE_MISMATCH = "zone_mismatch"
    ZONE_NOT_SERVED = "zone_not_served"
    INSTANCE_NOT_PLACED = "instance_not_placed"
    VOLUME_TYPE_INACTIVE = "volume_type_inactive"
    HOST_LOCAL_NEEDS_INSTANCE = "host_local_needs_instance"
    VOLUME_NOT_BOOTABLE = "volume_not_bootable"
    BOOT_VOLUME = "boot_volume_detach_not_allowed"
