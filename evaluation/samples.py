"""Drawing evaluation samples, and the store that keeps every sample ever drawn.

A sample is what the model did on one problem with one seed: its answer, length, tool
calls and the whole trajectory as text. It depends on the checkpoint, the generation
settings (temperature, limits, seed, engine, code service) and the rollout code, which
together name a store directory; inside it a sample is keyed by the problem's prompt and
its index j, and drawn with a seed of (eval seed, prompt, j). So raising k from 4 to 16
draws only samples 4-15, an evaluation killed mid-way resumes from its last saved chunk,
and a benchmark file that gains or changes a problem redraws that problem only.
Scores are not stored: they are recomputed from the answers on every run (cheap), so a
corrected reference never needs a redraw. Failed trajectories (engine errors) are not
stored either: they are counted, and drawn again next time.
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
from evaluation.benchmarks import EvalProblem
from pipeline import progress
from pipeline.code_version import code_version
from pipeline.keys import digest_json
from rollout.runtime import RolloutRuntime
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = ("prompt_sha", "sample", "seed", "final_answer", "response_tokens", "generated_tokens",
                  "num_turns", "finish_reason", "tool_statuses", "text")


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
        "tool_statuses": [c.status for c in t.tool_calls],
        "text": rt.fmt.decode(t.prompt_ids + t.response_ids),
    }


def missing_samples(problems: list[EvalProblem], k: int, have: dict[tuple[str, int], dict]) -> list[tuple[int, int]]:
    return [(i, j) for i, p in enumerate(problems) for j in range(k) if (p.prompt_sha, j) not in have]


async def draw(rt: RolloutRuntime, problems: list[EvalProblem], todo: list[tuple[int, int]], cfg: EvalConfig,
               store: SampleStore) -> int:
    """Roll out `todo` in chunks, saving each chunk; returns how many trajectories failed."""
    prompts, keys = [p.prompt for p in problems], [p.prompt_sha for p in problems]
    size = cfg.chunk_trajectories
    chunks = [todo[a:a + size] for a in range(0, len(todo), size)]
    failed = 0
    for n, chunk in enumerate(chunks):
        with progress.step(n, len(chunks)):
            trajs = await rt.rollout_samples(prompts, chunk, cfg.max_turns, cfg.max_response_tokens,
                                             cfg.temperature, cfg.seed, seed_keys=keys)
        store.add([sample_row(t, problems[t.problem_index], rt) for t in trajs if not t.failed])
        failed += sum(t.failed for t in trajs)
        log.info("evaluation: chunk %d/%d saved (%d trajectories)", n + 1, len(chunks), len(chunk))
    return failed
