#!/usr/bin/env bash
# Install OpenStack Ironic (standalone, from PyPI) into its own virtual environment, never into .venv:
# var/ironic/venv by default (IRONIC_VENV). Idempotent: does nothing when the pinned version is already there.
# The contract tests (tests/drivers/contract/test_baremetal_ironic.py) start and stop the service themselves.
# Also sushy-tools (a Redfish BMC emulator over libvirt domains, with libvirt-python) in a small venv of its own,
# var/sushy/venv by default (SUSHY_VENV), for the redfish test on a QEMU VM (tests/baremetal/test_redfish_qemu.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
IRONIC_VENV=${IRONIC_VENV:-var/ironic/venv}
IRONIC_VERSION=${IRONIC_VERSION:-39.0.0}
SUSHY_VENV=${SUSHY_VENV:-var/sushy/venv}
SUSHY_TOOLS_VERSION=${SUSHY_TOOLS_VERSION:-2.2.0}
LIBVIRT_PYTHON_VERSION=${LIBVIRT_PYTHON_VERSION:-12.8.0}  # the version requirements.lock pins for .venv
stamp="$IRONIC_VENV/.installed-$IRONIC_VERSION"
sushy_stamp="$SUSHY_VENV/.installed-$SUSHY_TOOLS_VERSION"
[ -f "$stamp" ] && [ -f "$sushy_stamp" ] && exit 0
command -v "$PYTHON" >/dev/null 2>&1 || { echo "need $PYTHON" >&2; exit 1; }
if [ ! -f "$sushy_stamp" ]; then
  start=$(date +%s)
  test -x "$SUSHY_VENV/bin/python" || "$PYTHON" -m venv "$SUSHY_VENV"
  "$SUSHY_VENV/bin/python" -m pip install -q --upgrade pip
  "$SUSHY_VENV/bin/python" -m pip install -q "sushy-tools==$SUSHY_TOOLS_VERSION" "libvirt-python==$LIBVIRT_PYTHON_VERSION"
  touch "$sushy_stamp"
  echo "== sushy-tools $SUSHY_TOOLS_VERSION installed in $SUSHY_VENV in $(( $(date +%s) - start )) s"
fi
[ -f "$stamp" ] && exit 0
start=$(date +%s)
test -x "$IRONIC_VENV/bin/python" || "$PYTHON" -m venv "$IRONIC_VENV"
"$IRONIC_VENV/bin/python" -m pip install -q --upgrade pip
"$IRONIC_VENV/bin/python" -m pip install -q "ironic==$IRONIC_VERSION"
touch "$stamp"
echo "== ironic $IRONIC_VERSION installed in $IRONIC_VENV in $(( $(date +%s) - start )) s"
