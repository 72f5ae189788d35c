#!/usr/bin/env bash
# `make demo`: start a local Prefect server (SQLite under .prefect/), register the
# deployments (scripts/prefect_up.sh), run the tiny pipeline to completion and say where to look.
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
cd "$REPO"

bash "$REPO/scripts/prefect_up.sh"

UNTIL="$(python -m orchestrator.status --last-implemented)"
echo "running rstar-full/tiny up to the last implemented stage: $UNTIL"
# RSTAR_DEMO_SET: dotted overrides for this run, split like a shell line (CI cuts SFT short
# with it). Parsed once; the flow run and the status table below get the same list.
mapfile -d '' -t OVERRIDES < <(python -c 'import os, shlex, sys
sys.stdout.write("".join(o + "\0" for o in shlex.split(os.environ.get("RSTAR_DEMO_SET", ""))))')
PARAMS="$(python -c 'import json, sys
print(json.dumps({"until": sys.argv[1], "overrides": sys.argv[2:]}))' "$UNTIL" "${OVERRIDES[@]}")"
[ "${#OVERRIDES[@]}" -gt 0 ] && echo "with overrides: ${OVERRIDES[*]}"
# A line per stage (state, progress, elapsed, ETA) from the Prefect API, no timeout; Ctrl-C
# stops watching only and says how to look again (flows/watch.py).
python -m flows.watch --start rstar-full/tiny --params "$PARAMS"

echo
SETS=(); for o in "${OVERRIDES[@]}"; do SETS+=(--set "$o"); done
python -m orchestrator.status --config configs/tiny.yaml "${SETS[@]}"
echo
echo "Prefect UI:  $PREFECT_UI_URL  (flow runs: $PREFECT_UI_URL/runs)"
echo "Artifacts:   $REPO/.rstar/artifacts  (one directory per stage and content digest, manifest.json inside)"
echo "Server and worker keep running for the UI; stop them with: make stop"
