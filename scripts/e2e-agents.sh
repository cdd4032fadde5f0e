#!/usr/bin/env bash
# Node agents for the demo service (make run): every sample-fleet host that gets a command runs an agent on the
# fake HGX driver. Usage: scripts/e2e-agents.sh --staff-token "$OPS" [--url http://127.0.0.1:8000] [--mig-host a-su2-n32]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m tests.e2e.agents "$@"
