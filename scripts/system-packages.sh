#!/usr/bin/env bash
# Install the Debian packages gpucloud's build and tests need, only those missing.
# libvirt-python builds against libvirt-dev; the real-component tests run libvirt/QEMU, OVN and OpenSM on ibsim;
# the redfish test's VM boots OVMF (UEFI, as Ironic deploys); the console's browser tests run Playwright in Debian's chromium (never `playwright install`); invoice and
# credit-note PDFs are set in DejaVu Sans (fonts-dejavu-core; settings BILLING_PDF_FONT, BILLING_PDF_FONT_BOLD); a test
# runs the application through PgBouncer in transaction pooling (pgbouncer; its service need not run); the
# operation tests run real workers on RabbitMQ too (rabbitmq-server).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PACKAGES=(postgresql-client redis-tools make curl gcc pkg-config libvirt-dev libvirt-daemon
  libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils ovmf ovn-central ovn-host openvswitch-common
  opensm ibsim-utils infiniband-diags chromium fonts-dejavu-core pgbouncer
  rabbitmq-server)
command -v dpkg >/dev/null 2>&1 || { echo "not a Debian system: install the equivalents of ${PACKAGES[*]}"; exit 0; }
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "== apt-get install ${missing[*]}"
apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
