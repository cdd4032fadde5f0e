#!/usr/bin/env bash
# Make sure PostgreSQL and Redis (and RabbitMQ, where installed) answer on 127.0.0.1; start them when they are
# installed but stopped, and create the application database when it is missing. Honours DATABASE_URL and
# REDIS_URL.
set -euo pipefail
DB_URL=${DATABASE_URL:-postgres://127.0.0.1:5432/gpucloud}
REDIS=${REDIS_URL:-redis://127.0.0.1:6379/0}

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -u "$REDIS" ping 2>/dev/null | grep -q PONG; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for v in $(ls /etc/postgresql 2>/dev/null); do pg_ctlcluster --skip-systemctl-redirect "$v" main start || true; done
  fi
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
fi
if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    mkdir -p /tmp/gpucloud-redis
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp/gpucloud-redis >/dev/null
  fi
  for _ in $(seq 1 30); do redis_up && break; sleep 1; done
  redis_up || { echo "Redis is not reachable at $REDIS" >&2; exit 1; }
fi

# RabbitMQ (the alternative Celery broker; the operation tests run on it too): started when installed but stopped
rabbit_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if command -v rabbitmq-server >/dev/null 2>&1 && ! rabbit_up; then
  if command -v service >/dev/null 2>&1; then service rabbitmq-server start >/dev/null 2>&1 || true; fi
  rabbit_up || rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do rabbit_up && break; sleep 1; done
  rabbit_up || echo "RabbitMQ is installed but not reachable on 127.0.0.1:5672" >&2
fi

db_name=${DB_URL##*/}; db_name=${db_name%%\?*}
if ! psql "${DB_URL%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname='${db_name}'" 2>/dev/null | grep -q 1; then
  psql "${DB_URL%/*}/postgres" -qc "CREATE DATABASE \"${db_name}\"" >/dev/null
fi
