"""The paper's path, rehearsed end to end on CPU (issue 21): `configs/rehearsal.yaml`
(the paper config with the sizes changed) through Prefect, on local copies of the data.

    bash scripts/rehearse.sh ../shared/data          # brings Prefect up, then runs this module
    python -m orchestrator.rehearse --data ../shared/data [--cut ci] [--stages-only]

What it does, in order:
  1. copies the data from `--data` into `.rstar/rehearsal/data`, where the config points: each
     cold-start source's real rows repeated to its share of the paper's mixture (/1000), the RL
     sources' rows, the benchmarks; APIGen-MT, Llama-Nemotron and OpenMathReasoning have no
     real row there, so their rows are built to the documented layout (orchestrator/rehearsal_rows.py);
  2. builds the `assets` stage (the Qwen3 tokenizer, a random Qwen3 of the real vocabulary)
     and starts two fake SGLang servers on its model (rollout/engines/fake_sglang.py);
  3. runs the flow `rstar-full/rehearsal` twice through the Prefect server, GPU stages on the
     `rstar-gpu` pool: with GRPO-RoC, then with PROF (the RL stages and their evaluations);
  4. checks that every stage's artifact, card and plot is there, and prints them.
`--stages-only` runs the stages as plain modules instead of through Prefect (no server needed).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from configs.load import load_config
from configs.schema import PipelineConfig
from orchestrator import rehearsal_rows
from orchestrator.stages import STAGES
from orchestrator.status import stage_refs
from stagekit import artifacts
from stagekit.paths import REPO_ROOT, resolve_local

CONFIG = "configs/rehearsal.yaml"
REAL_COLD_START = {  # source -> its real rows under <data>/samples (../shared/data/samples/SCHEMAS.md)
    "toolace": "toolace__DERIVED_lossy_sharegpt.jsonl", "glaive_fc_v2": "glaive_function_calling_v2.jsonl",
    "magicoder_oss": "magicoder_oss_instruct_75k.jsonl", "magicoder_evol": "magicoder_evol_instruct_110k.jsonl",
    "tulu3": "tulu_3_sft_mixture.jsonl"}
REAL_RL = {"dapo_math": "dapo_math_17k.jsonl", "project_euler": "project_euler.jsonl"}
BUILT = {"apigen_mt": rehearsal_rows.APIGEN_MT, "nemotron_chat": rehearsal_rows.NEMOTRON_CHAT,
         "openmathreasoning": rehearsal_rows.OPENMATHREASONING}
# A cut: overrides on top of the config (fewer rows, problems and steps; the same code paths)
# and, per run, the stage it stops after (absent: the whole pipeline). The CI cut trains one
# SFT step of 4 rows and one RL step, draws one sample per evaluation problem, and stops the
# GRPO-RoC run after the first RL stage's evaluation and the PROF run after its first RL
# stage: every code path of the paper's path once (stages 2-3 and the report run the same
# code as the demo's, which CI runs in full).
CUTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "ci": (["sft.epochs=0.1", "sft.global_batch_size=4", "sft.micro_batch_per_device=1", "rl.stage1.steps=1",
            "eval.samples_per_problem=1", "eval.pass_k=[1]", "eval.lm_eval.limit=1",
            "data.rl_curation.agreement.samples_per_problem=4"],
           {"grpo_roc": "eval_rl_stage1", "prof": "rl_stage1"}),
}
RUNS = (("grpo_roc", []), ("prof", ["rl.algorithm=prof"]))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def prepare_data(data: Path, cfg: PipelineConfig) -> list[str]:
    """Write every file the config's data and benchmark entries name; returns SOURCES.md's lines."""
    lines = [f"# Rehearsal data, copied from {data}", ""]
    for src in cfg.data.cold_start.sources:
        if src.source in BUILT:
            rows, origin = BUILT[src.source], "rows built to SCHEMAS.md's layout (no real row exists)"
        else:
            rows, origin = _jsonl(data / "samples" / REAL_COLD_START[src.source]), REAL_COLD_START[src.source]
        wanted = src.examples or len(rows)
        _write(resolve_local(src.location), [rows[i % len(rows)] for i in range(wanted)])
        lines.append(f"- {src.source}: {wanted} rows, {len(rows)} distinct, from {origin}")
    for src in cfg.data.rl_curation.sources:
        if src.source in BUILT:
            rows, origin = BUILT[src.source], "rows built to SCHEMAS.md's layout (no complete real row exists)"
        else:
            rows, origin = _jsonl(data / "samples" / REAL_RL[src.source]), REAL_RL[src.source]
        _write(resolve_local(src.location), rows)
        lines.append(f"- {src.source}: {len(rows)} rows from {origin}")
    benches = {b.location for b in cfg.eval.benchmarks} | {b.location for b in cfg.data.decontaminate.benchmarks}
    benches |= {t.data for t in cfg.eval.lm_eval.tasks if t.data}
    for location in sorted(benches):
        target = resolve_local(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data / "benchmarks" / target.name, target)
        lines.append(f"- benchmark {target.name}: a copy of {data / 'benchmarks' / target.name}")
    return lines


def _stage(module: str, overrides: list[str], *extra: str) -> dict:
    """Run one stage as a plain module; returns the artifact ref it prints last."""
    sets = [a for o in overrides for a in ("--set", o)]
    out = subprocess.run([sys.executable, "-m", module, *extra, "--config", CONFIG, *sets], cwd=REPO_ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(extra)} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextmanager
def fake_sglang_servers(model: str, ports: tuple[int, ...], log_dir: Path) -> Iterator[list[str]]:
    """SGLang's HTTP API on `ports`, each server a process of its own, started on `model`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    procs, urls = [], [f"http://127.0.0.1:{p}" for p in ports]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        for port in ports:
            log = (log_dir / f"fake-sglang-{port}.log").open("w")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "rollout.engines.fake_sglang", "--model-path", model, "--tokenizer-path", model,
                 "--port", str(port)], cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 120
        for url, proc in zip(urls, procs, strict=True):
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"fake SGLang server {url} exited; see {log_dir}")
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.time() > deadline:
                    raise RuntimeError(f"fake SGLang server {url} did not start within 120 s")
                time.sleep(0.5)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _flow_run(overrides: list[str], label: str, until: str | None) -> None:
    params = json.dumps({"overrides": overrides, **({"until": until} if until else {})})
    cmd = [sys.executable, "-m", "flows.watch", "--start", "rstar-full/rehearsal", "--params", params]
    print(f"flow run ({label}): {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=REPO_ROOT, check=True)


def _stages(until: str | None) -> list:
    names = [s.name for s in STAGES]
    return list(STAGES[: names.index(until) + 1] if until else STAGES)


def _stages_as_modules(overrides: list[str], until: str | None) -> None:
    for spec in _stages(until):
        extra = ("--stage", spec.name) if spec.module in ("training.rl", "evaluation.math_eval") else ()
        started = time.perf_counter()
        _stage(spec.module, overrides, *extra)
        print(f"  {spec.name:<16} {time.perf_counter() - started:6.1f} s", flush=True)


def check(cfg: PipelineConfig, label: str, until: str | None = None) -> list[str]:
    """Every stage's artifact for this config, with what a person looks at; raises on a gap."""
    refs = stage_refs(cfg)
    stages = _stages(until)
    missing = [s.name for s in stages if refs.get(s.name) is None]
    if missing:
        raise RuntimeError(f"rehearsal ({label}): no artifact for {', '.join(missing)}")
    no_card = [s.name for s in stages if not (Path(refs[s.name].uri) / artifacts.CARD).exists()]
    if no_card:
        raise RuntimeError(f"rehearsal ({label}): no card in the artifact of {', '.join(no_card)}")
    rows = [f"## {label}", "", "| stage | card | plots | metrics (first five) |", "|---|---|---|---|"]
    for spec in stages:
        path = Path(refs[spec.name].uri)
        metrics = json.loads((path / artifacts.MANIFEST).read_text())["metrics"]
        shown = ", ".join(f"{k}={v}" for k, v in list(metrics.items())[:5])
        plots = " ".join(p.name for p in sorted(path.glob("*.png")))
        rows.append(f"| {spec.name} | {artifacts.CARD} | {plots or '-'} | {shown} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.rehearse", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a folder like ../shared/data (samples/, benchmarks/)")
    parser.add_argument("--cut", choices=sorted(CUTS), help="fewer rows and steps (the CI run)")
    parser.add_argument("--stages-only", action="store_true", help="run the stages as plain modules, no Prefect")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                        help="a config override on top of the cut (repeatable)")
    parser.add_argument("--ports", default="30101,30102", help="ports of the two fake SGLang servers")
    args = parser.parse_args(argv)
    if not (args.data / "samples").is_dir() or not (args.data / "benchmarks").is_dir():
        raise SystemExit(f"error: {args.data} has no samples/ and benchmarks/ (a copy of ../shared/data is expected)")
    started = time.perf_counter()
    cut_sets, stops = CUTS.get(args.cut, ([], {}))
    cut = [*cut_sets, *args.sets]
    cfg = load_config(REPO_ROOT / CONFIG, cut)
    out = resolve_local(cfg.run.artifacts_root).parent
    lines = prepare_data(args.data.resolve(), cfg)
    (out / "data" / "SOURCES.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    model = Path(_stage("assets.build", cut)["uri"]) / artifacts.MODEL
    report = []
    with fake_sglang_servers(str(model), tuple(int(p) for p in args.ports.split(",")), out / "logs") as urls:
        for label, extra in RUNS:
            overrides = [*cut, *extra, f"rollout.sglang_urls={json.dumps(urls)}"]
            until = stops.get(label)
            if args.stages_only:
                _stages_as_modules(overrides, until)
            else:
                _flow_run(overrides, label, until)
            report += check(load_config(REPO_ROOT / CONFIG, overrides), label, until) + [""]
    report.append(f"rehearsal done in {(time.perf_counter() - started) / 60:.1f} min")
    (out / "rehearsal.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
