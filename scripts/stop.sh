#!/usr/bin/env bash
# `make stop`: stop the demo's Prefect worker and server.
set -uo pipefail
source "$(dirname "$0")/prefect_env.sh"
for pidfile in "$PREFECT_HOME"/worker-*.pid "$PREFECT_HOME"/server-*.pid; do
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null && echo "stopped $(basename "$pidfile" .pid) ($pid)"
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && { pkill -KILL -P "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; }  # a worker may linger
  rm -f "$pidfile"
done
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
if [ -f "$PREFECT_HOME/pg/data/postmaster.pid" ] && [ -n "$PG_BIN" ]; then
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PREFECT_HOME/pg/data" stop -m fast >/dev/null
  else "$PG_BIN/pg_ctl" -D "$PREFECT_HOME/pg/data" stop -m fast >/dev/null; fi && echo "stopped postgresql"
fi
