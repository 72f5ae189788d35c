#!/usr/bin/env bash
# `make rehearse DATA=../shared/data`: the paper's path on CPU (configs/rehearsal.yaml) through
# Prefect. Brings up the server, the pools and two workers (rstar-local, and rstar-gpu standing
# in for the GPU machines), then runs orchestrator/rehearse.py. Extra arguments go to it
# (for example --cut ci).
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
cd "$REPO"
DATA="${1:?usage: scripts/rehearse.sh DATA_DIR [--cut ci] [--set KEY=VALUE ...]}"
shift
bash "$REPO/scripts/prefect_up.sh" --gpu-worker
python -m orchestrator.rehearse --data "$DATA" "$@"
echo
echo "Prefect UI:  $PREFECT_UI_URL  (flow runs: $PREFECT_UI_URL/runs)"
echo "Report:      $REPO/.rstar/rehearsal/rehearsal.md; stop the server and workers with: make stop"
