#!/usr/bin/env bash
# Build the Terraform provider: its own virtual environment (terraform/.venv, pinned by requirements.lock), the
# provider package installed into it, a filesystem mirror (terraform/mirror/) and a Terraform CLI config file
# (terraform/gpucloud.tfrc) that installs gpucloud.local/gpucloud/gpucloud from that mirror. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3.11}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if [ ! -f .venv/.installed ] || [ requirements.lock -nt .venv/.installed ] || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
  touch .venv/.installed
fi
rm -rf mirror
.venv/bin/python - "$VERSION" <<'PY'
import sys
from pathlib import Path
from tf.runner import install_provider
install_provider("gpucloud.local", "gpucloud", "gpucloud", sys.argv[1], Path("mirror"),
                 Path(".venv/bin/terraform-provider-gpucloud"))
PY
MIRROR="$(pwd)/mirror"
cat > gpucloud.tfrc <<TFRC
# Written by terraform/build.sh (make terraform-provider): install gpucloud.local/* from the local mirror only.
provider_installation {
  filesystem_mirror {
    path    = "$MIRROR"
    include = ["gpucloud.local/*/*"]
  }
  direct {
    exclude = ["gpucloud.local/*/*"]
  }
}
TFRC
cat <<MSG
terraform-provider-gpucloud $VERSION: mirror in $MIRROR
Use it with:
  export TF_CLI_CONFIG_FILE=$(pwd)/gpucloud.tfrc
  # terraform { required_providers { gpucloud = { source = "gpucloud.local/gpucloud/gpucloud", version = "$VERSION" } } }
  terraform init && terraform apply
MSG
