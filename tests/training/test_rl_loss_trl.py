"""TRL as the oracle for training/rl_loss.py (issue #11).

Where both mean the same thing (plain GRPO, no selection, Clip-Higher 0.2/0.28, beta 0,
token-level mean over all loss tokens of the step), our loss and gradients must equal
those of TRL 1.16's `GRPOTrainer._compute_loss` with `loss_type="dapo"`: it divides the
summed token losses by `num_items_in_batch`, the loss tokens of the whole generation
batch gathered over processes (`grpo_trainer.py`, `_generate_and_score_completions` and
the `["cispo", "dapo", "vespo"]` branch of `_compute_loss`). "bnpo" divides each
micro-batch by its own token count and "grpo" averages per sequence first.

TRL's inputs are built from the trajectories directly, as its rollout_func path would:
`completion_mask` is 1 on every real completion token, `tool_mask` (its internal name
for a rollout_func's `env_mask`) is 0 on tool feedback, and the loss mask is their product.
Prompts share one length so that TRL's left-padded prompts and our right-padded rows
give the model the same positions.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from test_rl_loss import CLIP_HIGH, CLIP_LOW, TEMPERATURE, loss_and_grads, random_advantages, random_trajectories
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from rollout.trajectory import Trajectory
from training.rl_loss import make_batch

ROWS, MICRO = 6, 3


def trl_inputs(trajectories: list[Trajectory], advantages: list[float], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(t.response_ids) for t in trajectories)

    def padded(rows: list[list], value) -> torch.Tensor:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows])

    completion_ids = padded([t.response_ids for t in trajectories], pad_id)
    completion_mask = padded([[1] * len(t.response_ids) for t in trajectories], 0)
    tool_mask = padded([t.loss_mask for t in trajectories], 1)  # TRL pads tool_mask with 1
    return {
        "prompt_ids": torch.tensor([t.prompt_ids for t in trajectories]),
        "prompt_mask": torch.ones(len(trajectories), len(trajectories[0].prompt_ids), dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "old_per_token_logps": padded([t.logprobs for t in trajectories], 0.0).float(),
        "advantages": torch.tensor(advantages),
        "num_items_in_batch": (completion_mask * tool_mask).sum(),
    }


@pytest.fixture(scope="module")
def trainer(tiny_assets, tmp_path_factory) -> GRPOTrainer:
    from test_rl_loss import tiny_model

    tok = AutoTokenizer.from_pretrained(tiny_assets.tokenizer)
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("grpo")), use_cpu=True, bf16=False, report_to=[],
        loss_type="dapo", epsilon=CLIP_LOW, epsilon_high=CLIP_HIGH, beta=0.0, temperature=TEMPERATURE,
        per_device_train_batch_size=MICRO, num_generations=MICRO, gradient_accumulation_steps=ROWS // MICRO,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=tiny_model(vocab_size=len(tok), pad_id=tok.pad_token_id),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["unused"] * ROWS}),
        processing_class=tok,
    )
    # Set by Trainer's training loop to the micro-batches of the current step; we call the loss directly.
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps
    assert args.steps_per_generation == args.gradient_accumulation_steps and trainer.entropy_coef == 0.0
    return trainer


def test_loss_and_gradients_equal_trl_grpo_dapo(trainer):
    model, pad = trainer.model, trainer.processing_class.pad_token_id
    vocab = model.config.vocab_size
    trajectories = random_trajectories(model, ROWS, prompt_len=5, seed=7, vocab_size=vocab, pad_id=pad)
    advantages = random_advantages(ROWS, seed=8)
    batch = make_batch(trajectories, advantages, pad)  # old log-probs: the engine's (Trajectory.logprobs)
    model.train()  # TRL's train-mode normaliser: accumulation over steps_per_generation micro-batches

    ours_loss, ours_grads = loss_and_grads(model, batch, MICRO, batch.loss_tokens)

    inputs = trl_inputs(trajectories, advantages, pad)
    model.zero_grad()
    trl_loss = 0.0
    for start in range(0, ROWS, MICRO):
        part = {k: v if k == "num_items_in_batch" else v[start : start + MICRO] for k, v in inputs.items()}
        loss = trainer._compute_loss(model, part)
        loss.backward()
        trl_loss += loss.item()
    trl_grads = [p.grad.clone() for p in model.parameters()]

    assert abs(trl_loss) > 1e-3
    for bound in ("low", "high"):  # TRL's own count of tokens whose gradient a bound removed
        assert max(trainer._metrics["train"][f"clip_ratio/{bound}_mean"]) > 0, f"no token hit the {bound} bound"
    assert ours_loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-7)
    for ours, theirs in zip(ours_grads, trl_grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
