# Sourced by the scripts: a project-local Prefect home, offline-friendly settings.
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RSTAR_REPO="$REPO"
export PREFECT_HOME="$REPO/.prefect"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_PORT="${PREFECT_PORT:-4200}"
export PREFECT_API_URL="http://127.0.0.1:${PREFECT_PORT}/api"
export PREFECT_UI_URL="http://127.0.0.1:${PREFECT_PORT}"
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PATH="$REPO/.venv/bin:$PATH"
mkdir -p "$PREFECT_HOME"
