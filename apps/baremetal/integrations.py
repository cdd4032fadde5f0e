"""What bare metal plugs into other apps, registered once from `BaremetalConfig.ready`:

* compute: the operation kinds that run instances of `baremetal` flavors (`workflows.KINDS`; the same
  /instances API), and the node workflows, on the operations step runner.

Billing needs nothing more: a bare-metal instance is a compute instance whose ledger rows hold every GPU of its
host, so compute's usage source ``compute.instance`` meters it (SKU ``flavor:name=<flavor>``, GPU equivalents =
the host's GPUs) from its first `active` on, and the cleaning after delete (no allocation) is not billed.
"""
from __future__ import annotations


def register() -> None:
    from . import workflows

    workflows.register()
