"""The libvirt compute driver (see `driver.LibvirtDriver`)."""
from .driver import LibvirtDriver

__all__ = ["LibvirtDriver"]
