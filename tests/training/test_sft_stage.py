"""The SFT stage on the tiny model (issue 10): it trains, writes its curves and checkpoint,
and the checkpoint is what the rollout runtime loads for a multi-turn trajectory."""

from __future__ import annotations

import csv
import json

import pytest

from configs.data import ColdStartConfig, ColdStartSource
from configs.rollout import RolloutConfig, SamplingSettings
from configs.sandbox import SandboxConfig
from configs.schema import SFTConfig
from data_prep import cold_start
from rollout.groups import Problem
from rollout.runtime import build_runtime
from stagekit.workdir import WorkDir
from training import sft

pytestmark = pytest.mark.slow  # about 4 min on 2 free cores (15 min on a loaded machine)

# Enough steps at a high rate for the tiny model to pick up the protocol's shape (a
# reasoning line, then a tool call); measured: see tests below and README "SFT". With the
# small BPE's cross-word tokens a conversation is ~150 tokens, so a step is cheap, and the
# 40-step model still wrote malformed calls.
STEPS = 80


@pytest.fixture(scope="module")
def trained(tiny_assets_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("sft")
    (base / "cold_start").mkdir()
    cold_start.run(ColdStartConfig(sources=[ColdStartSource(source="synthetic", examples=256)]), {},
                   base / "cold_start")
    out = base / "out"
    out.mkdir()
    cfg = SFTConfig(lr=3e-3, global_batch_size=16, micro_batch_per_device=8, epochs=10, max_seq_tokens=512,
                    warmup_ratio=0.05, checkpoint_every_steps=40)
    inputs = {"base": tiny_assets_dir, "chats": base / "cold_start"}
    work = WorkDir(base / "work", "sft", "test")
    metrics = sft.run(cfg, RolloutConfig(), SandboxConfig(), inputs, out, work=work, max_steps=STEPS)
    return out, metrics, base


def test_sft_trains_and_writes_curves(trained):
    out, metrics, base = trained
    assert metrics["steps"] == STEPS and metrics["accumulation"] == 2 and metrics["processes"] == 1
    rows = list(csv.DictReader((out / "curves.csv").open()))
    assert [int(r["step"]) for r in rows] == list(range(1, STEPS + 1))
    losses = [float(r["loss"]) for r in rows]
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5, losses  # it learns the demonstrations
    assert all(float(r["grad_norm"]) > 0 for r in rows) and max(float(r["learning_rate"]) for r in rows) > 0
    assert all(float(r["tokens_per_s"]) > 0 for r in rows[1:])
    assert (out / "curves.png").stat().st_size > 10_000
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    checkpoints = sorted(p.name for p in (base / "work" / "sft" / "test" / "trainer").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-40", "checkpoint-80"]


def test_checkpoint_carries_the_training_template(trained):
    out, _, _ = trained
    config = json.loads((out / "model" / "tokenizer_config.json").read_text())
    template = config.get("chat_template") or (out / "model" / "chat_template.jinja").read_text()
    assert "{% generation %}" in template or "{%- generation %}" in template


async def test_rollout_runtime_loads_the_checkpoint_for_a_multi_turn_trajectory(trained):
    out, _, _ = trained
    model = str(out / "model")
    async with build_runtime(RolloutConfig(), SandboxConfig(), model, model) as rt:
        settings = SamplingSettings(temperature=0.6, max_response_tokens=400, max_turns=3, seed=1)
        groups = await rt.sample_and_score([Problem("Compute 37 * 412 + 5.", "15249")], 4, settings)
        text = [rt.fmt.decode(t.prompt_ids + t.response_ids) for t in groups[0]]
    multi = [t for t in groups[0] if t.num_turns >= 2]
    assert multi, [t.turns for t in groups[0]]
    t = multi[0]
    assert t.tool_calls and t.tool_calls[0].status in ("ok", "error", "invalid_call")
    whole = text[groups[0].index(t)]
    assert whole.count("<|im_start|>assistant\n") == t.num_turns and "<tool_response>" in whole
    assert all(m in (0, 1) for m in t.loss_mask) and 0 < sum(t.loss_mask) < len(t.loss_mask)
