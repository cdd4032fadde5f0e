#!/usr/bin/env bash
# Fails when docs/openapi/v1.yaml differs from the schema the code generates (run `make schema` to update), or
# when the schema is not valid OpenAPI 3 by a strict validator (openapi-spec-validator: e.g. a default that its own
# minLength refuses).
set -euo pipefail
cd "$(dirname "$0")/.."
SECRET_KEY=${SECRET_KEY:-$(scripts/secret-key.sh)}
export SECRET_KEY
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
.venv/bin/python manage.py spectacular --file "$tmp" --validate
if ! diff -u docs/openapi/v1.yaml "$tmp"; then
  echo "docs/openapi/v1.yaml is stale: run 'make schema' and commit it." >&2
  exit 1
fi
.venv/bin/openapi-spec-validator docs/openapi/v1.yaml
echo "OpenAPI schema up to date and valid."
