#!/usr/bin/env bash
# Bring up what a flow run needs, once: a local Prefect server (SQLite under .prefect/, or
# PostgreSQL with RSTAR_DB=postgres), the work pools, the deployments of prefect.yaml and a
# worker for `rstar-local`. With --gpu-worker also a worker for `rstar-gpu`: the pool the
# paper config sends its GPU stages to (a second local worker stands in for the GPU
# machines in the rehearsal). Sourced by demo.sh and rehearse.sh; idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/prefect_env.sh"
cd "$REPO"

if [ "${RSTAR_DB:-sqlite}" = postgres ]; then
  eval "$(bash "$REPO/scripts/postgres.sh")"   # a shared server's database (README, Scaling out)
  echo "Prefect database: $PREFECT_API_DATABASE_CONNECTION_URL"
fi

if ! curl -sf "$PREFECT_API_URL/health" >/dev/null; then
  echo "starting the Prefect server on $PREFECT_UI_URL (log: .prefect/server-$PREFECT_PORT.log)"
  nohup prefect server start --host 127.0.0.1 --port "$PREFECT_PORT" >"$PREFECT_HOME/server-$PREFECT_PORT.log" 2>&1 &
  echo $! >"$PREFECT_HOME/server-$PREFECT_PORT.pid"
  for _ in $(seq 1 180); do curl -sf "$PREFECT_API_URL/health" >/dev/null && break; sleep 1; done
  curl -sf "$PREFECT_API_URL/health" >/dev/null || { echo "server did not start"; tail -20 "$PREFECT_HOME/server-$PREFECT_PORT.log"; exit 1; }
fi

prefect work-pool inspect rstar-local >/dev/null 2>&1 || prefect work-pool create rstar-local --type process >/dev/null
# The GPU machines' pool: the paper config sends its GPU stages there (a local worker with --gpu-worker).
prefect work-pool inspect rstar-gpu >/dev/null 2>&1 || prefect work-pool create rstar-gpu --type process >/dev/null
prefect --no-prompt deploy --all >"$PREFECT_HOME/deploy.log" 2>&1 || { cat "$PREFECT_HOME/deploy.log"; exit 1; }

# Workers poll for scheduled runs every 2 s (Prefect's default is 10): a pipeline of a dozen
# stages sent to another pool waits for a poll at each one.
export PREFECT_WORKER_QUERY_SECONDS="${PREFECT_WORKER_QUERY_SECONDS:-2}"
WORKER_PID="$PREFECT_HOME/worker-$PREFECT_PORT.pid"
if ! { [ -f "$WORKER_PID" ] && kill -0 "$(cat "$WORKER_PID")" 2>/dev/null; }; then
  nohup prefect worker start --pool rstar-local >"$PREFECT_HOME/worker-$PREFECT_PORT.log" 2>&1 &
  echo $! >"$WORKER_PID"
fi

if [ "${1:-}" = --gpu-worker ]; then
  GPU_PID="$PREFECT_HOME/worker-gpu-$PREFECT_PORT.pid"
  if ! { [ -f "$GPU_PID" ] && kill -0 "$(cat "$GPU_PID")" 2>/dev/null; }; then
    nohup prefect worker start --pool rstar-gpu >"$PREFECT_HOME/worker-gpu-$PREFECT_PORT.log" 2>&1 &
    echo $! >"$GPU_PID"
  fi
fi
