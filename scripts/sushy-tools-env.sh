#!/usr/bin/env bash
# Install the sushy-tools Redfish emulator (from PyPI, with libvirt-python for its libvirt driver) into its own
# virtual environment, never into .venv: var/sushy-tools/venv by default (SUSHY_TOOLS_VENV). Idempotent. The tests
# start and stop the emulator themselves: the fencing driver's contract test (fake systems driver,
# tests/drivers/contract/test_fencing_redfish.py) and Ironic's redfish hardware type in front of a QEMU VM
# (libvirt driver, tests/baremetal/test_redfish_qemu.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
SUSHY_TOOLS_VENV=${SUSHY_TOOLS_VENV:-var/sushy-tools/venv}
SUSHY_TOOLS_VERSION=${SUSHY_TOOLS_VERSION:-2.2.0}
LIBVIRT_PYTHON_VERSION=${LIBVIRT_PYTHON_VERSION:-12.8.0}  # the version requirements.lock pins for .venv
stamp="$SUSHY_TOOLS_VENV/.installed-$SUSHY_TOOLS_VERSION-libvirt-$LIBVIRT_PYTHON_VERSION"
[ -f "$stamp" ] && exit 0
command -v "$PYTHON" >/dev/null 2>&1 || { echo "need $PYTHON" >&2; exit 1; }
test -x "$SUSHY_TOOLS_VENV/bin/python" || "$PYTHON" -m venv "$SUSHY_TOOLS_VENV"
"$SUSHY_TOOLS_VENV/bin/python" -m pip install -q "sushy-tools==$SUSHY_TOOLS_VERSION" \
  "libvirt-python==$LIBVIRT_PYTHON_VERSION"
touch "$stamp"
