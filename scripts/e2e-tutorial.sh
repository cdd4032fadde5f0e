#!/usr/bin/env bash
# Follow docs/tutorial.md against a running demo service the way a new user does: run its ```sh blocks in order in
# one shell, start the stand-in agents where the tutorial says so, and read the invitation e-mails from the output
# of `make run` instead of pasting them. Prints every command's output; exits non-zero when a block fails.
# Usage: scripts/e2e-tutorial.sh <file holding the output of `make run`> [port, default 8000]
set -euo pipefail
cd "$(dirname "$0")/.."
LOG=$(realpath "$1"); PORT=${2:-8000}
work=$(mktemp -d); trap 'kill $(cat "$work/agents.pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/prelude.sh" <<PRELUDE
set -eo pipefail
invitation_token() {  # the token of the newest invitation e-mailed to \$1, from the make run output
  python3 -c '
import re, sys
text = open(sys.argv[1], errors="replace").read().replace("=\n", "")
blocks = [b for b in text.split("Content-Type: text/plain") if "To: " + sys.argv[2] in b]
print(re.findall(r"accept\?token=([A-Za-z0-9_:\-]+)", blocks[-1])[-1])' "$LOG" "\$1"
}
PRELUDE
n=0
awk '/^```sh$/ {on=1; n++; next} /^```$/ {on=0; next} on {print > sprintf("'"$work"'/block%02d.sh", n)}' docs/tutorial.md
{
  cat "$work/prelude.sh"
  for f in "$work"/block*.sh; do
    echo "echo '### $(basename "$f")'"
    sed -e "s#127.0.0.1:8000#127.0.0.1:${PORT}#g" \
        -e "s#'<paste the token from the e-mail to \([^>]*\)>'#\"\$(invitation_token \1)\"#" "$f"
    if [ "$(basename "$f")" = block01.sh ]; then
      echo "scripts/e2e-agents.sh --url http://127.0.0.1:${PORT} --staff-token \"\$OPS\" --mig-host a-su2-n32 >'$work/agents.log' 2>&1 & echo \$! >'$work/agents.pid'"
      echo "for _ in \$(seq 60); do grep -q following '$work/agents.log' && break; sleep 1; done; cat '$work/agents.log'"
    fi
  done
} >"$work/tutorial.sh"
bash "$work/tutorial.sh"
echo "### tutorial finished"
