"""Networking writes. Keyword-only, `actor` first; each runs in one transaction and writes an audit event."""
from .ib import (
    ib_partition_create,
    ib_partition_delete,
    ib_partition_join_vf,
    ib_partition_join_whole_host,
    ib_partition_member_add,
    ib_partition_member_join,
    ib_partition_member_remove,
    ib_partition_members_leave_instance,
    ib_partition_service_port_join,
    pkey_pool_set,
    virtual_guid_allocate,
    virtual_guid_pool_set,
    virtual_guids_free_released,
)
from .ports import (
    port_create,
    port_create_for_baremetal,
    port_create_for_instance,
    port_delete,
    port_update,
    ports_delete_for_instance,
)
from .public_ips import public_ip_associate, public_ip_create, public_ip_delete, public_ip_pool_create
from .security_groups import (
    security_group_create,
    security_group_delete,
    security_group_rule_create,
    security_group_rule_delete,
)
from .vpcs import subnet_create, subnet_delete, vpc_create, vpc_delete, vpc_update

__all__ = [
    "ib_partition_create", "ib_partition_delete", "ib_partition_join_vf", "ib_partition_join_whole_host",
    "ib_partition_member_add", "ib_partition_member_join", "ib_partition_member_remove",
    "ib_partition_members_leave_instance",
    "ib_partition_service_port_join", "pkey_pool_set", "port_create",
    "port_create_for_baremetal", "port_create_for_instance", "port_delete", "port_update",
    "ports_delete_for_instance", "public_ip_associate",
    "public_ip_create", "public_ip_delete", "public_ip_pool_create", "security_group_create",
    "security_group_delete", "security_group_rule_create", "security_group_rule_delete", "subnet_create",
    "subnet_delete", "virtual_guid_allocate", "virtual_guid_pool_set", "virtual_guids_free_released",
    "vpc_create", "vpc_delete", "vpc_update",
]
