#!/usr/bin/env bash
# Install OpenStack Ironic (standalone, from PyPI) into its own virtual environment, never into .venv:
# var/ironic/venv by default (IRONIC_VENV). Idempotent: does nothing when the pinned version is already there.
# The contract tests (tests/drivers/contract/test_baremetal_ironic.py) start and stop the service themselves.
# (sushy-tools, the Redfish BMC emulator the redfish tests use, has its own: scripts/sushy-tools-env.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
IRONIC_VENV=${IRONIC_VENV:-var/ironic/venv}
IRONIC_VERSION=${IRONIC_VERSION:-39.0.0}
stamp="$IRONIC_VENV/.installed-$IRONIC_VERSION"
[ -f "$stamp" ] && exit 0
command -v "$PYTHON" >/dev/null 2>&1 || { echo "need $PYTHON" >&2; exit 1; }
start=$(date +%s)
test -x "$IRONIC_VENV/bin/python" || "$PYTHON" -m venv "$IRONIC_VENV"
"$IRONIC_VENV/bin/python" -m pip install -q --upgrade pip
"$IRONIC_VENV/bin/python" -m pip install -q "ironic==$IRONIC_VERSION"
touch "$stamp"
echo "== ironic $IRONIC_VERSION installed in $IRONIC_VENV in $(( $(date +%s) - start )) s"
