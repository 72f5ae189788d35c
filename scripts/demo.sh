#!/usr/bin/env bash
# `make demo`: start a local Prefect server (SQLite under .prefect/), register the
# deployments, run the tiny pipeline to completion and say where to look.
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
cd "$REPO"

if ! curl -sf "$PREFECT_API_URL/health" >/dev/null; then
  echo "starting the Prefect server on $PREFECT_UI_URL (log: .prefect/server.log)"
  nohup prefect server start --host 127.0.0.1 --port "$PREFECT_PORT" >"$PREFECT_HOME/server.log" 2>&1 &
  echo $! >"$PREFECT_HOME/server.pid"
  for _ in $(seq 1 180); do curl -sf "$PREFECT_API_URL/health" >/dev/null && break; sleep 1; done
  curl -sf "$PREFECT_API_URL/health" >/dev/null || { echo "server did not start"; tail -20 "$PREFECT_HOME/server.log"; exit 1; }
fi

prefect work-pool inspect rstar-local >/dev/null 2>&1 || prefect work-pool create rstar-local --type process >/dev/null
prefect --no-prompt deploy --all >"$PREFECT_HOME/deploy.log" 2>&1 || { cat "$PREFECT_HOME/deploy.log"; exit 1; }

if ! { [ -f "$PREFECT_HOME/worker.pid" ] && kill -0 "$(cat "$PREFECT_HOME/worker.pid")" 2>/dev/null; }; then
  nohup prefect worker start --pool rstar-local >"$PREFECT_HOME/worker.log" 2>&1 &
  echo $! >"$PREFECT_HOME/worker.pid"
fi

UNTIL="$(python -m pipeline.status --last-implemented)"
echo "running rstar-full/tiny up to the last implemented stage: $UNTIL"
prefect deployment run rstar-full/tiny --watch -p until="$UNTIL" | tee "$PREFECT_HOME/last-run.log"

echo
python -m pipeline.status --config configs/tiny.yaml
echo
echo "Prefect UI:  $PREFECT_UI_URL  (flow runs: $PREFECT_UI_URL/runs)"
echo "Artifacts:   $REPO/.rstar/artifacts  (one directory per stage and content digest, manifest.json inside)"
echo "Server and worker keep running for the UI; stop them with: make stop"
