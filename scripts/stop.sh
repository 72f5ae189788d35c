#!/usr/bin/env bash
# `make stop`: stop the demo's Prefect worker and server.
set -uo pipefail
source "$(dirname "$0")/prefect_env.sh"
for name in worker server; do
  pidfile="$PREFECT_HOME/$name.pid"
  if [ -f "$pidfile" ]; then
    pid="$(cat "$pidfile")"
    pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null && echo "stopped $name ($pid)"
    rm -f "$pidfile"
  fi
done
