#!/usr/bin/env bash
# Run the whole service in the foreground: migrate, load the demo data, start the web server on $PORT (default
# 8000; it serves the web console at / and the API at /api/v1/), the demo node agents (one per demo host) and, once
# they have all enrolled, the Celery worker and beat; in the background, OpenStack Ironic standalone (fake-hardware)
# on $IRONIC_PORT (default 6385; installed into var/ironic/venv on first use, log var/log/ironic.log; IRONIC=0
# leaves it out). The API is ready
# without waiting for Ironic: until Ironic answers, bare-metal requests answer 503 baremetal_unavailable.
# Ctrl-C stops everything.
# The worker, beat and agents are supervised: if one dies (even by SIGKILL) it is started again after 1 s and
# unfinished operations resume at their last committed step. If the web server dies, everything stops.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
export PORT
mkdir -p var/log var/run
# DEBUG is false here, so the settings need a real SECRET_KEY: this checkout's own, generated once (var/secret_key)
SECRET_KEY=${SECRET_KEY:-$(scripts/secret-key.sh)}
export SECRET_KEY
$PY manage.py migrate --noinput >var/log/migrate.log
# the demo bare-metal hosts are enrolled into the Ironic started below (their enrollment waits for it)
BAREMETAL_DEMO_ENROLL=$([ "${IRONIC:-1}" != 0 ] && echo true || echo false) $PY manage.py demo_load

IRONIC_PORT=${IRONIC_PORT:-6385}
export BAREMETAL_IRONIC_ENDPOINT=${BAREMETAL_IRONIC_ENDPOINT:-http://127.0.0.1:${IRONIC_PORT}}
ironic_starter=""

loops=()
cleanup() {
  trap - EXIT INT TERM
  kill "${loops[@]}" 2>/dev/null || true          # stop the supervisors first, so nothing restarts
  for f in var/run/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; rm -f "$f"; done
  if [ -n "$ironic_starter" ]; then
    kill "$ironic_starter" 2>/dev/null || true
    scripts/ironic-standalone.sh stop var/ironic/run || true
  fi
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

supervise() {  # supervise NAME LOGFILE CMD...: run CMD, and start it again whenever it exits
  local name=$1 log=$2
  shift 2
  while true; do
    "$@" >>"$log" 2>&1 &
    echo $! >"var/run/$name.pid"
    wait $! || true
    echo "$(date -u +%FT%TZ) $name exited; restarting in 1 s (log: $log)" >&2
    sleep 1
  done
}

# Bare metal: Ironic standalone in the background (an install on first use takes minutes; its start 10-40 s). Nothing
# waits for it; the API answers bare-metal requests with 503 until it is up.
if [ "${IRONIC:-1}" != 0 ]; then
  ( scripts/ironic-env.sh && scripts/ironic-standalone.sh start var/ironic/run "$IRONIC_PORT" ) >>var/log/ironic.log 2>&1 &
  ironic_starter=$!
fi

# The demo's volumes: pools of the same in-process test driver (docs/storage.md), unless set otherwise.
export STORAGE_SHARED_POOL_URI=${STORAGE_SHARED_POOL_URI:-test:///default}
# gunicorn's control socket (gunicornc -s var/run/web.ctl) in this checkout: its default, under the home directory,
# is shared by every stack of the user, which would replace or remove each other's.
LOG_FILE=var/log/app.log .venv/bin/gunicorn --config deploy/gunicorn.conf.py gpucloud.wsgi:application --bind "127.0.0.1:${PORT}" --workers 2 --threads 4 \
  --pid var/run/web.pid --control-socket var/run/web.ctl --access-logfile var/log/access.log \
  --error-logfile var/log/web.log &
web=$!
for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
# Fake node agents for the demo hosts (libvirt test-driver URIs only), one per host, all enrolled at start (docs/admin-portal.md,
# "The demo fleet"). The Celery worker and beat start once they have: the `heartbeat_lost` watch (beat, or a check
# left queued by an earlier run) would otherwise judge the hosts by the last heartbeat of an earlier `make run`.
rm -f var/run/agents.ready
supervise agents var/log/agents.log $PY manage.py demo_agents --url "http://127.0.0.1:${PORT}" \
  --ready-file var/run/agents.ready & loops+=($!)
for _ in $(seq 1 240); do [ -f var/run/agents.ready ] && break; sleep 0.5; done
[ -f var/run/agents.ready ] || echo "demo agents not all enrolled after 120 s (var/log/agents.log); starting the workers" >&2
# One worker process (threads): the demo fleet's libvirt test:///default keeps its domains per process (docs/compute.md).
supervise worker var/log/worker.log .venv/bin/celery -A gpucloud worker -Q default,provisioning,reconcile,billing \
  --pool threads -c 4 --loglevel INFO -n main@%h & loops+=($!)
# Webhook and e-mail delivery on its own small worker: a tenant's slow receiver never holds a provisioning thread.
supervise notify var/log/notify.log .venv/bin/celery -A gpucloud worker -Q notifications \
  --pool threads -c 2 --loglevel INFO -n notify@%h & loops+=($!)
supervise beat var/log/beat.log .venv/bin/celery -A gpucloud beat --schedule var/run/celerybeat-schedule \
  --loglevel INFO & loops+=($!)
password=${DEMO_PASSWORD:-$(cat var/demo-password 2>/dev/null || true)}
echo "gpucloud console: http://127.0.0.1:${PORT}/  (sign in as demo@example.com / ${password})"
echo "admin portal: http://127.0.0.1:${PORT}/staff/fleet  (staff: ops@example.com operator, billing@example.com billing" \
  "admin, support@example.com read-only; password ${password}; code: $PY manage.py demo_code)"
echo "gpucloud API: http://127.0.0.1:${PORT}/api/v1/  (docs: /api/v1/docs/, readiness: /readyz; logs in var/log/)"
[ -n "$ironic_starter" ] && echo "Ironic (bare metal, fake-hardware): ${BAREMETAL_IRONIC_ENDPOINT}, starting in the background (var/log/ironic.log)"
wait "$web"
