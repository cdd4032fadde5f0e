#!/usr/bin/env bash
# Run the whole service in the foreground: migrate, load the demo data, start the Celery worker and beat,
# then the web server on $PORT (default 8000). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
mkdir -p var/log var/run
$PY manage.py migrate --noinput >var/log/migrate.log
$PY manage.py demo_load
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
# One worker process (threads): the demo fleet's libvirt test:///default keeps its domains per process (docs/compute.md).
.venv/bin/celery -A gpucloud worker -Q default,provisioning,reconcile,billing --pool threads -c 4 --loglevel INFO \
  >var/log/worker.log 2>&1 & pids+=($!)
.venv/bin/celery -A gpucloud beat --schedule var/run/celerybeat-schedule --loglevel INFO \
  >var/log/beat.log 2>&1 & pids+=($!)
.venv/bin/gunicorn gpucloud.wsgi:application --bind "127.0.0.1:${PORT}" --workers 2 --threads 4 \
  --access-logfile var/log/access.log --error-logfile var/log/web.log & pids+=($!)
for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
# Fake node agents for the demo hosts (test:/// URIs only): MIG hosts enroll now, others on their first command.
$PY manage.py demo_agents --url "http://127.0.0.1:${PORT}" >var/log/agents.log 2>&1 & pids+=($!)
echo "gpucloud API: http://127.0.0.1:${PORT}/api/v1/  (docs: /api/v1/docs/, readiness: /readyz; logs in var/log/)"
wait -n "${pids[@]}"
