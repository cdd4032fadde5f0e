"""Compute error codes (stable, snake_case) and the exceptions services raise with them."""
import enum

from apps.core.errors import Conflict, NotFound, ValidationFailed  # noqa: F401  (re-exported for services)


class Code(enum.StrEnum):
    INSTANCE_NOT_FOUND = "instance_not_found"
    CLUSTER_NOT_FOUND = "cluster_not_found"
    INVALID_SSH_KEY = "invalid_ssh_key"
    SSH_KEY_EXISTS = "ssh_key_exists"
    NAME_TAKEN = "name_taken"
    NOT_SUPPORTED_FOR_KIND = "not_supported_for_flavor_kind"
    BAREMETAL_NETWORK_UNSUPPORTED = "baremetal_network_unsupported"
    USER_DATA_TOO_LARGE = "user_data_too_large"
    FLAVOR_DOES_NOT_FIT = "flavor_does_not_fit"
    INVALID_FLAVOR = "invalid_flavor"
    SSH_KEY_IN_USE = "ssh_key_in_use"
    DOMAIN_VANISHED = "domain_vanished"
    CAPACITY_RELEASED = "capacity_released"
    DOMAIN_NOT_DEFINED = "domain_not_defined"
    DOMAIN_NOT_FOUND = "domain_not_found"
    CONSOLE_LOG_UNAVAILABLE = "console_log_unavailable"
    AGENT_COMMAND_FAILED = "agent_command_failed"
    DEVICE_MISSING = "device_missing"  # a device of the instance did not come back after its host rebooted
    NO_HOST_URI = "host_has_no_libvirt_uri"
    SHARE_NOT_SUPPORTED_FOR_VM = "share_not_supported_for_vm"
