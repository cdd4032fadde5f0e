#!/usr/bin/env bash
# Print this checkout's SECRET_KEY, generating it once into var/secret_key (mode 600; var/ is not committed).
# `make run`, `make test`, the schema targets and the e2e stack use it; production sets its own SECRET_KEY.
set -euo pipefail
cd "$(dirname "$0")/.."
file=var/secret_key
if [ ! -s "$file" ]; then
  mkdir -p var
  (umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(50))' >"$file.tmp" && mv "$file.tmp" "$file")
fi
cat "$file"
