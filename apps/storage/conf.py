"""Storage settings, read from the environment (12-factor)."""
import environ

env = environ.Env()


def shared_pool_uri() -> str:
    """`STORAGE_SHARED_POOL_URI`: the libvirt URI through which volumes of shared (not host-local) volume types are
    made, grown, snapshotted and deleted ('' = the libvirt driver's default connection). Their pool must be
    reachable at the same path from every hypervisor that attaches them (an NFS export, `netfs`)."""
    return env.str("STORAGE_SHARED_POOL_URI", default="")
