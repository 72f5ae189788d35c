"""The rollout runtime other packages use: problems in, trajectories out (SPEC §2, §4, §5).

async with build_runtime(cfg.rollout, cfg.sandbox, model_path, tokenizer_path) as rt:
    groups = await rt.rollout(problems, samples_per_problem=16, max_turns=10,
                              max_response_tokens=8192, temperature=1.0, seed=0)
    groups.failed, groups.failures        # trajectories the engines never finished, and why
    rewards = await rt.score([t for g in groups for t in g], references_repeated)
    await rt.update_weights(checkpoint_dir)   # after an RL step

A failed trajectory (engine errors after every retry) stays in its group, so groups keep
their size and order, with `failed` True, `finish_reason` "failed" and `failure` saying
why; `score` gives it None. Training and filters must leave it out.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from transformers import AutoTokenizer

from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from pipeline.progress import report
from rollout.agent_loop import AgentState, ToolRunner, TurnLimits
from rollout.engines.base import Engine, build_engines
from rollout.prompt import ChatFormat
from rollout.reward import score
from rollout.scheduler import get_scheduler
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)


def trajectory_seed(seed: int, problem_index: int | str, sample_index: int) -> int:
    """A well-spread 48-bit seed per sample; turn k samples with seed + k."""
    return random.Random(f"{seed}:{problem_index}:{sample_index}").getrandbits(48)


class RolloutGroups(list):
    """One list of trajectories per problem (a plain list of lists), plus failure counts."""

    @property
    def failed(self) -> int:
        """Trajectories recorded as failed (no engine answered a turn within the retries)."""
        return sum(t.failed for group in self for t in group)

    @property
    def failures(self) -> Counter[str]:
        """How many trajectories failed for each reason."""
        return Counter(t.failure for group in self for t in group if t.failure is not None)

    @property
    def engine_retries(self) -> int:
        """Generation requests that failed and were retried or given up, over all trajectories."""
        return sum(t.engine_attempts for group in self for t in group)


class RolloutRuntime:
    """Engines + sandbox + chat format, ready to roll out batches of problems."""

    def __init__(self, cfg: RolloutConfig, fmt: ChatFormat, engines: Sequence[Engine], sandbox: ToolRunner) -> None:
        self.cfg = cfg
        self.fmt = fmt
        self.engines = list(engines)
        self.sandbox = sandbox
        self._schedule = get_scheduler(cfg.scheduler)

    async def rollout(
        self,
        problems: list[str],
        samples_per_problem: int,
        max_turns: int,
        max_response_tokens: int,
        temperature: float,
        seed: int,
    ) -> RolloutGroups:
        """`samples_per_problem` trajectories for each problem, one inner list per problem, in order."""
        pairs = [(i, j) for i in range(len(problems)) for j in range(samples_per_problem)]
        flat = await self.rollout_samples(problems, pairs, max_turns, max_response_tokens, temperature, seed)
        groups = RolloutGroups(flat[i * samples_per_problem:(i + 1) * samples_per_problem]
                               for i in range(len(problems)))
        return groups

    async def rollout_samples(
        self,
        problems: list[str],
        samples: Sequence[tuple[int, int]],
        max_turns: int,
        max_response_tokens: int,
        temperature: float,
        seed: int,
        seed_keys: Sequence[str] | None = None,
    ) -> list[Trajectory]:
        """One trajectory per (problem index, sample index) pair, in order.

        Sample j of problem i draws with `trajectory_seed(seed, key, j)`, key = `seed_keys[i]`
        (default: i), so a sample is the same whichever other samples are rolled out with it
        (evaluation keys on the problem's text and tops up k without redrawing).
        """
        limits = TurnLimits(
            max_turns=max_turns,
            max_response_tokens=max_response_tokens,
            temperature=temperature,
            top_p=self.cfg.top_p,
            max_tool_calls_per_turn=self.cfg.max_tool_calls_per_turn,
        )
        prompts: dict[int, list[int]] = {}
        flat: list[Trajectory] = []
        for i, j in samples:
            if i not in prompts:
                prompts[i] = self.fmt.prompt_ids(problems[i])
            key = seed_keys[i] if seed_keys is not None else i
            flat.append(Trajectory(i, j, list(prompts[i]), seed=trajectory_seed(seed, key, j)))
        states = [AgentState(t, self.fmt, limits) for t in flat]

        total, done = len(states), 0
        start = time.perf_counter()

        def on_done(_: Trajectory) -> None:
            nonlocal done
            done += 1
            report(done, total, f"rollout: {done}/{total} trajectories")

        report(0, total, f"rollout: 0/{total} trajectories")
        await self._schedule(states, self.engines, self.sandbox, on_done, self.cfg)
        elapsed = time.perf_counter() - start
        tokens = sum(t.generated_tokens for t in flat)
        log.info("rolled out %d trajectories in %.1f s (%.0f generated tokens/s)", total, elapsed,
                 tokens / max(elapsed, 1e-9))
        failed, retries = sum(t.failed for t in flat), sum(t.engine_attempts for t in flat)
        if failed or retries:
            log.warning("rollout: %d of %d trajectories failed, %d engine requests retried; reasons: %s",
                        failed, total, retries, dict(Counter(t.failure for t in flat if t.failed)))
        return flat

    async def score(self, trajectories: Sequence[Trajectory], references: Sequence[str]) -> list[float | None]:
        """Reward per trajectory, in order; None for a failed one (it is not verified and keeps reward None)."""
        if len(trajectories) != len(references):
            raise ValueError(f"{len(trajectories)} trajectories but {len(references)} references")
        kept = [i for i, t in enumerate(trajectories) if not t.failed]
        rewards = await score([trajectories[i] for i in kept], [references[i] for i in kept], self.sandbox)  # type: ignore[arg-type]
        out: list[float | None] = [None] * len(trajectories)
        for i, reward in zip(kept, rewards, strict=True):
            out[i] = reward
        return out

    async def update_weights(self, path: str) -> None:
        """Push new policy weights to every engine and drop prefixes cached under the old ones."""
        for engine in self.engines:
            await engine.update_weights(path)
            await engine.flush_cache()


@asynccontextmanager
async def build_runtime(
    rollout_cfg: RolloutConfig, sandbox_cfg: SandboxConfig, model_path: str, tokenizer_path: str,
    sandbox: ToolRunner | None = None,
) -> AsyncIterator[RolloutRuntime]:
    """Start engines and the sandbox (a local service when `sandbox_cfg.urls` is empty); close both after.
    A caller that already holds a sandbox client passes it as `sandbox` (it stays open)."""
    from sandbox.client import build_sandbox  # the sandbox package owns its client and server

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    fmt = ChatFormat(tokenizer)
    engines = build_engines(rollout_cfg, model_path, tokenizer)
    try:
        if sandbox is not None:
            yield RolloutRuntime(rollout_cfg, fmt, engines, sandbox)
        else:
            async with build_sandbox(sandbox_cfg) as own:
                yield RolloutRuntime(rollout_cfg, fmt, engines, own)
    finally:
        for engine in engines:
            await engine.aclose()
