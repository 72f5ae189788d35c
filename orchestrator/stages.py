"""The stages of SPEC §1, in pipeline order: what each runs, reads and consumes.

This table is the pipeline graph, written once. Each stage names its inputs by role
(`policy`, `problems`, `checkpoint`, …) and the upstream stage that fills the role; its
`run()` receives `inputs[role]`, the path of that stage's artifact, and never looks up a
stage name itself. So stage 2 is stage 1's code with other inputs: its policy and
optimizer come from `rl_stage1`.

A stage's cache key covers what `select` returns (its config sections, operational
fields left out), the content digests of its inputs and its code version, computed from
the source of its module and the project modules it imports (orchestrator/keys.py):
changing one stage's config or code reruns it and what follows, nothing before. No
version is ever set by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from configs.schema import PipelineConfig

_RL_STAGE_FIELDS = {"stage1", "stage2", "stage3", "stage3_filter"}


@dataclass(frozen=True)
class StageSpec:
    name: str
    module: str  # `python -m <module>` runs it; the module defines run() and main()
    select: Callable[[PipelineConfig], dict]  # keyword arguments of run(); `cfg` first
    inputs: dict[str, str] = field(default_factory=dict, hash=False)  # role -> upstream stage
    delivered_by: str | None = None  # None: implemented. Else the issue that delivers it.
    long_running: bool = False  # True: the task runs it as a watched subprocess (SPEC §10)
    # True: it trains across processes (one per GPU, `hardware`); others run as one process,
    # since their work (rollouts on the engines) is not split across ranks and every rank
    # would repeat it (found by the rehearsal: 64 copies of each evaluation on the paper config).
    distributed: bool = False
    needs_gpus: bool = False  # checked where the stage runs, against `hardware` (orchestrator/hardware.py)

    @property
    def implemented(self) -> bool:
        return self.delivered_by is None

    @property
    def upstream(self) -> tuple[str, ...]:
        """The stages this one consumes, each once, in role order."""
        return tuple(dict.fromkeys(self.inputs.values()))


def _rl(stage: str) -> Callable[[PipelineConfig], dict]:
    # Shared RL settings plus this stage's own: another stage's numbers stay out of the key.
    return lambda c: {"cfg": getattr(c.rl, stage), "rl": c.rl.model_copy(update=dict.fromkeys(_RL_STAGE_FIELDS)),
                      "rollout": c.rollout, "sandbox": c.sandbox, "stage": f"rl_{stage}"}


# In report order: the untrained model first, so every gain has its starting point.
EVAL_STAGES = ("eval_base", "eval_sft", "eval_rl_stage1", "eval_rl_stage2", "eval_rl_stage3")


def _eval(label: str, checkpoint: str | None = None) -> StageSpec:
    """The evaluation of one checkpoint, run as soon as the checkpoint exists (SPEC §9)."""
    return StageSpec(
        f"eval_{label}", "evaluation.math_eval",
        lambda c: {"cfg": c.eval, "rollout": c.rollout, "sandbox": c.sandbox, "label": label},
        inputs={"checkpoint": checkpoint or label}, needs_gpus=True, long_running=True,
    )


STAGES: tuple[StageSpec, ...] = (
    StageSpec("assets", "assets.build", lambda c: {"cfg": c.model}),
    StageSpec("cold_start", "data_prep.cold_start", lambda c: {"cfg": c.data.cold_start}),
    StageSpec(
        "rl_curation", "data_prep.rl_curation",
        lambda c: {"cfg": c.data.rl_curation, "rollout": c.rollout, "sandbox": c.sandbox},
        inputs={"filter_model": "assets"},  # the tiny model, when the agreement filter names none
    ),
    StageSpec(
        "decontaminate", "data_prep.decontaminate", lambda c: {"cfg": c.data.decontaminate},
        inputs={"problems": "rl_curation"},
    ),
    StageSpec(
        "sft", "training.sft", lambda c: {"cfg": c.sft, "rollout": c.rollout, "sandbox": c.sandbox},
        inputs={"base": "assets", "chats": "cold_start"}, needs_gpus=True, long_running=True, distributed=True,
    ),
    _eval("sft"),
    StageSpec(
        "rl_stage1", "training.rl", _rl("stage1"),
        inputs={"policy": "sft", "problems": "decontaminate"}, needs_gpus=True, long_running=True, distributed=True,
    ),
    _eval("rl_stage1"),
    StageSpec(  # SPEC §7: stage 2 continues stage 1's optimizer and schedule
        "rl_stage2", "training.rl", _rl("stage2"),
        inputs={"policy": "rl_stage1", "optimizer": "rl_stage1", "problems": "decontaminate"},
        needs_gpus=True, long_running=True, distributed=True,
    ),
    _eval("rl_stage2"),
    StageSpec(
        "stage3_filter", "training.stage3_filter",
        lambda c: {"cfg": c.rl.stage3_filter, "limits": c.rl.stage3, "rollout": c.rollout, "sandbox": c.sandbox,
                   "temperature": c.rl.temperature, "seed": c.rl.seed},
        inputs={"policy": "rl_stage2", "problems": "decontaminate"}, needs_gpus=True, long_running=True,
    ),
    StageSpec(  # SPEC §7: stage 3 starts a fresh optimizer from the stage-2 policy
        "rl_stage3", "training.rl", _rl("stage3"),
        inputs={"policy": "rl_stage2", "problems": "stage3_filter"}, needs_gpus=True, long_running=True,
        distributed=True,
    ),
    _eval("rl_stage3"),
    # The base model (the `assets` one here, the hub model on the paper's path). Last among the
    # evaluations, so that it takes a free slot and never holds back SFT or an RL stage.
    _eval("base", "assets"),
    StageSpec("eval_report", "evaluation.compare", lambda c: {},
              inputs={name.removeprefix("eval_"): name for name in EVAL_STAGES}),
)

BY_NAME: dict[str, StageSpec] = {s.name: s for s in STAGES}


def load_stages(path: str) -> tuple[StageSpec, ...]:
    """The stage tuple named `module:attribute` (the real one, or a test's toy stages)."""
    import importlib

    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr or "STAGES")


def get_stage(name: str) -> StageSpec:
    if name not in BY_NAME:
        raise KeyError(f"unknown stage {name!r}; stages are: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def downstream_of(names: set[str]) -> set[str]:
    """Every stage that depends, directly or not, on one of `names` (names included)."""
    out = set(names)
    for spec in STAGES:  # STAGES is topologically ordered
        if out.intersection(spec.upstream):
            out.add(spec.name)
    return out
