#!/usr/bin/env bash
# `make screenshot`: headless-Chromium screenshot of the latest rstar-full flow run,
# with a check that its stages are listed (needs `make demo` first and Debian chromium).
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh"
cd "$REPO"
command -v chromium >/dev/null || { echo "install Debian's chromium first: apt-get install -y chromium"; exit 1; }
python scripts/ui_check.py "${1:-results/flow-run.png}"
