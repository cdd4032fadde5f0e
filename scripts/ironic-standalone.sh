#!/usr/bin/env bash
# Run OpenStack Ironic standalone (API and conductor in one `ironic` process, no RPC bus, no Keystone, SQLite)
# from the virtual environment scripts/ironic-env.sh made. Hardware types fake-hardware and redfish.
#   scripts/ironic-standalone.sh start DIR [PORT]   config, database and log in DIR; waits until the API answers;
#                                                   prints the endpoint (http://127.0.0.1:PORT)
#                                                   IRONIC_HTTP_URL: where something serves DIR/httpboot
#                                                   (redfish-virtual-media's ISOs; default http://127.0.0.1:8082)
#   scripts/ironic-standalone.sh stop DIR           SIGTERM, then SIGKILL after 15 s (a conductor that failed to
#                                                   register its hardware types ignores SIGTERM)
set -euo pipefail
cd "$(dirname "$0")/.."
IRONIC_VENV=${IRONIC_VENV:-var/ironic/venv}
cmd=${1:?usage: $0 start|stop DIR [PORT]}
dir=$(mkdir -p "${2:?usage: $0 start|stop DIR [PORT]}" && cd "$2" && pwd)
port=${3:-6385}

if [ "$cmd" = stop ]; then
  [ -f "$dir/ironic.pid" ] || exit 0
  pid=$(cat "$dir/ironic.pid")
  kill -TERM "$pid" 2>/dev/null || exit 0
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || { rm -f "$dir/ironic.pid"; exit 0; }; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$dir/ironic.pid"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2; }
[ -x "$IRONIC_VENV/bin/ironic" ] || { echo "Ironic is not installed in $IRONIC_VENV: run make ironic" >&2; exit 1; }
mkdir -p "$dir/locks" "$dir/httpboot"
cat > "$dir/ironic.conf" <<CONF
[DEFAULT]
rpc_transport = none
auth_strategy = noauth
host = gpucloud-ironic
debug = false
log_file = $dir/ironic.log
enabled_hardware_types = fake-hardware,redfish
enabled_bios_interfaces = fake,no-bios,redfish
enabled_boot_interfaces = fake,redfish-virtual-media
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake,ramdisk
enabled_firmware_interfaces = fake,no-firmware,redfish
enabled_inspect_interfaces = fake,no-inspect,redfish
enabled_management_interfaces = fake,redfish
enabled_network_interfaces = noop
enabled_power_interfaces = fake,redfish
enabled_raid_interfaces = fake,no-raid,redfish
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = fake,no-vendor,redfish

[api]
host_ip = 127.0.0.1
port = $port

[database]
connection = sqlite:///$dir/ironic.sqlite

[dhcp]
dhcp_provider = none

[conductor]
# Off by default here, as in a conductor shared with nodes that must not be cleaned: the product asks for cleaning
# per node (the node's automated_clean field, set at enrolment), and its exit receipts read back from the node
# history (record_step_flows_in_history, Ironic's default) whether cleaning ran.
automated_clean = false

[oslo_concurrency]
lock_path = $dir/locks

[deploy]
http_root = $dir/httpboot
http_url = ${IRONIC_HTTP_URL:-http://127.0.0.1:8082}
CONF
[ -f "$dir/ironic.sqlite" ] || "$IRONIC_VENV/bin/ironic-dbsync" --config-file "$dir/ironic.conf" create_schema \
  >"$dir/dbsync.log" 2>&1
"$IRONIC_VENV/bin/ironic" --config-file "$dir/ironic.conf" >"$dir/stdout.log" 2>&1 &
echo $! > "$dir/ironic.pid"
for _ in $(seq 1 240); do  # 17-20 s on an idle 2-core machine, 46 s seen under load
  if curl -sf "http://127.0.0.1:$port/v1" >/dev/null 2>&1; then echo "http://127.0.0.1:$port"; exit 0; fi
  kill -0 "$(cat "$dir/ironic.pid")" 2>/dev/null || break
  sleep 0.5
done
echo "Ironic did not answer on port $port; last log lines:" >&2
tail -n 30 "$dir/ironic.log" "$dir/stdout.log" >&2 || true
"$0" stop "$dir"
exit 1
