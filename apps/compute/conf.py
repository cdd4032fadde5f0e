"""Compute settings, read from the environment (12-factor; defaults suit production KVM hosts).

  COMPUTE_VIRT_TYPE        kvm (tests: qemu, i.e. TCG)
  COMPUTE_MACHINE          q35
  COMPUTE_UEFI             true (needs OVMF firmware on the host)
  COMPUTE_SEED_DIR         "" = the driver's default (local URIs only; remote hosts get seeds through a pool)
  COMPUTE_IMAGE_DIR        "" = no root disk; else images are pre-staged on hosts as <dir>/<image>.<format>
  COMPUTE_TRANSIENT_RETRIES  5: host-unreachable errors in a create step before the create fails
  COMPUTE_STOP_GRACE_S     60: seconds a soft stop waits for the guest before powering off
  COMPUTE_OVS_BRIDGE       br-int: the Open vSwitch integration bridge tenant NICs plug into (OVN)
  COMPUTE_VANISHED_GRACE_S 300: seconds the reconciler waits before releasing a vanished domain's allocation
  COMPUTE_CAPACITY_POLL_S  15: how often a create that lost its capacity to a concurrent claim (or a cluster
                           that waits for capacity) places again
  COMPUTE_QUEUE_TIMEOUT_S  86400: how long a cluster created with `queue: true` waits for capacity
  COMPUTE_CONSOLE_LOG_TIMEOUT_S  5: how long GET .../console-log waits for a worker to read the log
"""
import environ

env = environ.Env()


def virt_type() -> str:
    return env.str("COMPUTE_VIRT_TYPE", default="kvm")


def machine() -> str:
    return env.str("COMPUTE_MACHINE", default="q35")


def uefi() -> bool:
    return env.bool("COMPUTE_UEFI", default=True)


def image_dir() -> str:
    return env.str("COMPUTE_IMAGE_DIR", default="")


def capacity_poll_s() -> float:
    return env.float("COMPUTE_CAPACITY_POLL_S", default=15.0)


def queue_timeout_s() -> int:
    return env.int("COMPUTE_QUEUE_TIMEOUT_S", default=86400)


def transient_retries() -> int:
    return env.int("COMPUTE_TRANSIENT_RETRIES", default=5)


def stop_grace_seconds() -> float:
    return env.float("COMPUTE_STOP_GRACE_S", default=60.0)


def vanished_grace_seconds() -> float:
    return env.float("COMPUTE_VANISHED_GRACE_S", default=300.0)


def ovs_bridge() -> str:
    return env.str("COMPUTE_OVS_BRIDGE", default="br-int")


def console_log_timeout_s() -> float:
    return env.float("COMPUTE_CONSOLE_LOG_TIMEOUT_S", default=5.0)
