#!/usr/bin/env bash
# `make demo`: start a local Prefect server (SQLite under .prefect/), register the
# deployments, run the tiny pipeline to completion and say where to look.
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
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
# The GPU machines' pool: the paper config sends its GPU stages there. No worker here.
prefect work-pool inspect rstar-gpu >/dev/null 2>&1 || prefect work-pool create rstar-gpu --type process >/dev/null
prefect --no-prompt deploy --all >"$PREFECT_HOME/deploy.log" 2>&1 || { cat "$PREFECT_HOME/deploy.log"; exit 1; }

WORKER_PID="$PREFECT_HOME/worker-$PREFECT_PORT.pid"
if ! { [ -f "$WORKER_PID" ] && kill -0 "$(cat "$WORKER_PID")" 2>/dev/null; }; then
  nohup prefect worker start --pool rstar-local >"$PREFECT_HOME/worker-$PREFECT_PORT.log" 2>&1 &
  echo $! >"$WORKER_PID"
fi

UNTIL="$(python -m orchestrator.status --last-implemented)"
echo "running rstar-full/tiny up to the last implemented stage: $UNTIL"
# RSTAR_DEMO_SET: dotted overrides for this run, split like a shell line (CI cuts SFT short
# with it). Parsed once; the flow run and the status table below get the same list.
mapfile -d '' -t OVERRIDES < <(python -c 'import os, shlex, sys
sys.stdout.write("".join(o + "\0" for o in shlex.split(os.environ.get("RSTAR_DEMO_SET", ""))))')
PARAMS="$(python -c 'import json, sys
print(json.dumps({"until": sys.argv[1], "overrides": sys.argv[2:]}))' "$UNTIL" "${OVERRIDES[@]}")"
[ "${#OVERRIDES[@]}" -gt 0 ] && echo "with overrides: ${OVERRIDES[*]}"
prefect deployment run rstar-full/tiny --watch --watch-timeout 3600 --params "$PARAMS" | tee "$PREFECT_HOME/last-run.log"

echo
SETS=(); for o in "${OVERRIDES[@]}"; do SETS+=(--set "$o"); done
python -m orchestrator.status --config configs/tiny.yaml "${SETS[@]}"
echo
echo "Prefect UI:  $PREFECT_UI_URL  (flow runs: $PREFECT_UI_URL/runs)"
echo "Artifacts:   $REPO/.rstar/artifacts  (one directory per stage and content digest, manifest.json inside)"
echo "Server and worker keep running for the UI; stop them with: make stop"
