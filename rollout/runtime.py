"""The rollout runtime other packages use: problems in, scored groups out (SPEC §2, §4, §5).

async with build_runtime(cfg.rollout, cfg.sandbox, model_path, tokenizer_path, progress=report) as rt:
    settings = cfg.rollout.sampling(temperature=1.0, max_response_tokens=8192, max_turns=10, seed=0)
    groups = await rt.sample_and_score([Problem(text, answer) ...], samples_per_problem=16, settings=settings)
    groups[i].scored, groups[i].solved     # problem i's finished trajectories, how many scored 1
    groups.failed, groups.failures         # trajectories the engines never finished, and why
    await rt.update_weights(checkpoint_dir)   # after an RL step: returns the new weight version

`sample_and_score` is the one loop of generate -> run tools -> verify in the project: RL
steps, SFT's held-out check, the stage-3 filter, the agreement filter and evaluation all
call it. What to compute from its groups lives in rollout/metrics.py.

A failed trajectory (engine errors after every retry) stays in its group, so groups keep
their size and order, with `failed` True, `finish_reason` "failed", `failure` saying why
and reward None; training, filters and metrics leave it out and count it.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

from transformers import AutoTokenizer

from configs.rollout import RolloutConfig, SamplingSettings
from configs.sandbox import SandboxConfig
from rollout.agent_loop import AgentState, ToolRunner, TurnLimits
from rollout.engines.base import Engine, build_engines
from rollout.groups import Problem, ScoredGroup, ScoredGroups
from rollout.prompt import ChatFormat, chat_format
from rollout.reward import Verifier, score
from rollout.scheduler import get_scheduler
from rollout.trajectory import Trajectory

log = logging.getLogger(__name__)

# (done, total, message): the caller's progress hook (a stage passes stagekit.progress.report).
ProgressFn = Callable[[float, float, str], None]


class CodeService(ToolRunner, Verifier, Protocol):
    """What the runtime needs of the sandbox client: tool calls run, answers verified."""


def trajectory_seed(seed: int, problem_index: int | str, sample_index: int) -> int:
    """A well-spread 48-bit seed per sample; turn k samples with seed + k."""
    return random.Random(f"{seed}:{problem_index}:{sample_index}").getrandbits(48)


class RolloutRuntime:
    """Engines + sandbox + chat format, ready to roll out batches of problems."""

    def __init__(self, cfg: RolloutConfig, fmt: ChatFormat, engines: Sequence[Engine], sandbox: CodeService,
                 progress: ProgressFn | None = None) -> None:
        self.cfg = cfg
        self.fmt = fmt
        self.engines = list(engines)
        self.sandbox = sandbox  # runs tool calls and verifies answers (sandbox.client.SandboxClient)
        self.progress = progress
        self._schedule = get_scheduler(cfg.scheduler)
        self.weight_version = 0  # weight pushes so far: the engines answer under this version

    async def sample_and_score(
        self,
        problems: Sequence[Problem],
        samples_per_problem: int,
        settings: SamplingSettings,
        only: Sequence[tuple[int, int]] | None = None,
    ) -> ScoredGroups:
        """`samples_per_problem` scored trajectories for each problem, one group per problem, in order.

        `only`: draw just these (problem index, sample index) pairs (evaluation tops up the
        samples its store lacks); the other groups come back empty. Sample j of problem i is
        the same whichever other samples are drawn with it (see `Problem.seed_key`).
        """
        pairs = only if only is not None else [(i, j) for i in range(len(problems)) for j in range(samples_per_problem)]
        t0 = time.perf_counter()
        flat = await self._generate(problems, pairs, settings)
        t1 = time.perf_counter()
        finished = [t for t in flat if not t.failed]  # a failed one is not verified and keeps reward None
        await score(finished, [problems[t.problem_index].reference for t in finished], self.sandbox)
        groups = [ScoredGroup(i, p) for i, p in enumerate(problems)]
        for t in flat:
            groups[t.problem_index].trajectories.append(t)
        return ScoredGroups(groups, rollout_s=t1 - t0, verification_s=time.perf_counter() - t1)

    async def _generate(self, problems: Sequence[Problem], pairs: Sequence[tuple[int, int]],
                        settings: SamplingSettings) -> list[Trajectory]:
        limits = TurnLimits(
            max_turns=settings.max_turns,
            max_response_tokens=settings.max_response_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tool_calls_per_turn=self.cfg.max_tool_calls_per_turn,
            extra_tool_calls=self.cfg.extra_tool_calls,
        )
        prompts: dict[int, list[int]] = {}
        flat: list[Trajectory] = []
        for i, j in pairs:
            if i not in prompts:
                prompts[i] = self.fmt.prompt_ids(problems[i].text)
            key = problems[i].seed_key if problems[i].seed_key is not None else i
            flat.append(Trajectory(i, j, list(prompts[i]), seed=trajectory_seed(settings.seed, key, j)))
        states = [AgentState(t, self.fmt, limits) for t in flat]

        total, done = len(states), 0
        start = time.perf_counter()

        def on_done(_: Trajectory) -> None:
            nonlocal done
            done += 1
            self._report(done, total, f"rollout: {done}/{total} trajectories")

        self._report(0, total, f"rollout: 0/{total} trajectories")
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

    def _report(self, done: float, total: float, message: str) -> None:
        if self.progress is not None:
            self.progress(done, total, message)

    async def update_weights(self, path: str) -> int:
        """Push new policy weights to every engine and drop prefixes cached under the old ones;
        returns their version, which the results answered under them carry."""
        version = self.weight_version + 1
        for engine in self.engines:
            await engine.update_weights(path, version)
            await engine.flush_cache()
        self.weight_version = version
        return version

    async def load_state_dict(self, state: Mapping[str, object]) -> int:
        """`update_weights` from memory, for engines that hold their model in this process (`hf`)."""
        version = self.weight_version + 1
        for engine in self.engines:
            await engine.load_state_dict(state, version)
        self.weight_version = version
        return version


@asynccontextmanager
async def build_runtime(
    rollout_cfg: RolloutConfig, sandbox_cfg: SandboxConfig, model_path: str, tokenizer_path: str,
    sandbox: CodeService | None = None, progress: ProgressFn | None = None,
) -> AsyncIterator[RolloutRuntime]:
    """Start engines and the sandbox (a local service when `sandbox_cfg.urls` is empty); close both after.
    A caller that already holds a sandbox client passes it as `sandbox` (it stays open)."""
    from sandbox.client import build_sandbox  # the sandbox package owns its client and server

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    fmt = chat_format(tokenizer, rollout_cfg.prompt)
    engines = build_engines(rollout_cfg, model_path, tokenizer)
    try:
        for engine in engines:  # SGLang servers outlive a stage: make them serve this stage's model
            await engine.serve(model_path)
        if sandbox is not None:
            yield RolloutRuntime(rollout_cfg, fmt, engines, sandbox, progress)
        else:
            async with build_sandbox(sandbox_cfg) as own:
                yield RolloutRuntime(rollout_cfg, fmt, engines, own, progress)
    finally:
        for engine in engines:
            await engine.aclose()
