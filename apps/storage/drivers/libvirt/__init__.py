"""The libvirt storage driver (see `driver.LibvirtStorageDriver`)."""
from .driver import LibvirtStorageDriver

__all__ = ["LibvirtStorageDriver"]
