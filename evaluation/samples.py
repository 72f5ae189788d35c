"""Drawing evaluation samples, and the store that keeps every sample ever drawn.

A sample is what the model did on one problem with one seed: its answer, length, tool
calls and the whole trajectory as text. It depends on the checkpoint, the generation
settings (temperature, limits, seed, engine, code service) and the rollout code, which
together name a store directory; inside it a sample is keyed by the problem's prompt and
its index j, and drawn with a seed of (eval seed, prompt, j). So raising k from 4 to 16
draws only samples 4-15, an evaluation killed mid-way resumes from its last saved chunk,
and a benchmark file that gains or changes a problem redraws that problem only.
A sample is scored as it is drawn (the runtime's one scored-sampling call) and stored with
its score and the reference it was scored against; a corrected reference rescores the
stored answer (evaluation/evaluate.py), never redraws it. Failed trajectories (engine
errors) are not stored: they are counted, and drawn again next time.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pandas as pd

from configs.eval import EvalConfig
from configs.fields import key_view
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from evaluation.problem_sets import EvalProblem
from orchestrator.code_version import code_version
from orchestrator.keys import digest_json
from rollout.runtime import RolloutRuntime
from rollout.trajectory import Trajectory
from stagekit import progress

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = ("prompt_sha", "sample", "seed", "final_answer", "response_tokens", "generated_tokens",
                  "num_turns", "finish_reason", "tool_statuses", "text", "score", "scored_against")


def generation_key(model_identity: str, cfg: EvalConfig, rollout: RolloutConfig, sandbox: SandboxConfig) -> str:
    """Everything a sample depends on besides its prompt and index."""
    return digest_json({
        "model": model_identity,
        "temperature": cfg.temperature, "max_response_tokens": cfg.max_response_tokens,
        "max_turns": cfg.max_turns, "seed": cfg.seed,
        "rollout": key_view(rollout), "sandbox": key_view(sandbox),
        "code": code_version("rollout.runtime").digest,
    }, 24)


class SampleStore:
    """Parquet part files under one directory; each part is written whole, then renamed."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def load(self) -> dict[tuple[str, int], dict]:
        rows: dict[tuple[str, int], dict] = {}
        for part in sorted(self.root.glob("part-*.parquet")):
            for row in pd.read_parquet(part).to_dict("records"):
                rows.setdefault((row["prompt_sha"], int(row["sample"])), row)
        return rows

    def add(self, rows: list[dict]) -> None:
        if not rows:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"part-{uuid.uuid4().hex}.parquet"
        tmp = self.root / f".{name}.tmp"
        pd.DataFrame(rows, columns=list(SAMPLE_COLUMNS)).to_parquet(tmp, index=False)
        os.replace(tmp, self.root / name)


def sample_row(t: Trajectory, problem: EvalProblem, rt: RolloutRuntime) -> dict:
    return {
        "prompt_sha": problem.prompt_sha, "sample": t.sample_index, "seed": t.seed,
        "final_answer": t.final_answer, "response_tokens": t.response_tokens,
        "generated_tokens": t.generated_tokens, "num_turns": t.num_turns, "finish_reason": t.finish_reason,
        "tool_statuses": list(t.call_statuses),
        "text": rt.fmt.decode(t.prompt_ids + t.response_ids),
        "score": t.reward, "scored_against": problem.reference_key,
    }


def missing_samples(problems: list[EvalProblem], k: int, have: dict[tuple[str, int], dict]) -> list[tuple[int, int]]:
    return [(i, j) for i, p in enumerate(problems) for j in range(k) if (p.prompt_sha, j) not in have]


async def draw(rt: RolloutRuntime, problems: list[EvalProblem], todo: list[tuple[int, int]], cfg: EvalConfig,
               store: SampleStore) -> int:
    """Roll out and score `todo` in chunks, saving each chunk; returns how many trajectories failed."""
    samples = [p.to_sample() for p in problems]
    settings = rt.cfg.sampling(cfg.temperature, cfg.max_response_tokens, cfg.max_turns, cfg.seed)
    size = cfg.chunk_trajectories
    chunks = [todo[a:a + size] for a in range(0, len(todo), size)]
    failed = 0
    for n, chunk in enumerate(chunks):
        with progress.step(n, len(chunks)):
            groups = await rt.sample_and_score(samples, cfg.samples_per_problem, settings, only=chunk)
        store.add([sample_row(t, problems[t.problem_index], rt) for t in groups.trajectories() if not t.failed])
        failed += groups.failed
        log.info("evaluation: chunk %d/%d saved (%d trajectories)", n + 1, len(chunks), len(chunk))
    return failed
