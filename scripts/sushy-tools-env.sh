#!/usr/bin/env bash
# Install the sushy-tools Redfish emulator (from PyPI) into its own virtual environment, never into .venv:
# var/sushy-tools/venv by default (SUSHY_TOOLS_VENV). Idempotent. The fencing driver's contract test
# (tests/drivers/contract/test_fencing_redfish.py) starts and stops the emulator itself (fake systems driver).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
SUSHY_TOOLS_VENV=${SUSHY_TOOLS_VENV:-var/sushy-tools/venv}
SUSHY_TOOLS_VERSION=${SUSHY_TOOLS_VERSION:-2.2.0}
stamp="$SUSHY_TOOLS_VENV/.installed-$SUSHY_TOOLS_VERSION"
[ -f "$stamp" ] && exit 0
command -v "$PYTHON" >/dev/null 2>&1 || { echo "need $PYTHON" >&2; exit 1; }
test -x "$SUSHY_TOOLS_VENV/bin/python" || "$PYTHON" -m venv "$SUSHY_TOOLS_VENV"
"$SUSHY_TOOLS_VENV/bin/python" -m pip install -q "sushy-tools==$SUSHY_TOOLS_VERSION"
touch "$stamp"
