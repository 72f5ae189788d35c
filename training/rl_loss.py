"""The RL policy loss (SPEC §6 steps 5-6): PPO clipped objective with Clip-Higher, token-level mean.

The ratio is clipped to [1 - clip_low, 1 + clip_high] (0.2 / 0.28, DAPO's Clip-Higher); no
KL term, no entropy term. The mean runs over every loss token of the optimizer step: each
micro-batch contributes `sum of its token losses / loss_tokens_total`, where the total
counts the loss tokens of the whole step on all processes, so accumulating micro-batches
(and averaging gradients over processes, see `policy_loss`) gives exactly one global token
mean, not a mean of micro-batch means. Tool feedback carries loss mask 0; truncated
trajectories are ordinary trajectories with reward 0.

Old log-probs come from the engine that sampled (`Trajectory.logprobs`, what `make_batch`
puts in) or are recomputed by the trainer before the update (`recompute_old_logprobs`, the
reference's default): `with_old_logprobs(batch, source, ...)` picks by name. TRL 1.16's
GRPO loss with `loss_type="dapo"` is the oracle (tests/training/test_rl_loss_trl.py).

Alignment: every per-token tensor is [B, L-1]; column t scores token t+1 given tokens 0..t.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Literal

import torch
from torch import Tensor

from rollout.trajectory import Trajectory

OldLogprobSource = Literal["recompute", "engine"]


@dataclass
class RLBatch:
    """Padded tensors for a list of kept trajectories (prompt + response, right-padded)."""

    input_ids: Tensor  # [B, L] long: prompt_ids + response_ids, then pad_id
    attention_mask: Tensor  # [B, L] long: 1 on real tokens (tool feedback included), 0 on padding
    loss_mask: Tensor  # [B, L-1] float: column t is 1 when token t+1 is model-generated response text
    old_logprobs: Tensor  # [B, L-1] float32: log pi_old(token t+1), natural log; 0 where loss_mask is 0
    advantages: Tensor  # [B] float32: one advantage per trajectory, shared by its tokens

    @property
    def loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    def to(self, device: torch.device | str) -> RLBatch:
        return RLBatch(*(getattr(self, f.name).to(device) for f in fields(self)))

    def rows(self, start: int, end: int) -> RLBatch:
        """Rows start..end-1, cut to their longest sequence (right padding changes no result)."""
        length = max(int(self.attention_mask[start:end].sum(1).max().item()), 2)
        return RLBatch(
            self.input_ids[start:end, :length],
            self.attention_mask[start:end, :length],
            self.loss_mask[start:end, : length - 1],
            self.old_logprobs[start:end, : length - 1],
            self.advantages[start:end],
        )


def make_batch(trajectories: list[Trajectory], advantages: list[float], pad_id: int) -> RLBatch:
    """Pad kept trajectories into one batch; old log-probs are the engine's sampling log-probs."""
    if len(trajectories) != len(advantages):
        raise ValueError(f"{len(trajectories)} trajectories but {len(advantages)} advantages")
    if not trajectories:
        raise ValueError("make_batch needs at least one trajectory")
    for t in trajectories:
        name = f"trajectory (problem {t.problem_index}, sample {t.sample_index})"
        if t.failed:
            raise ValueError(f"{name} failed ({t.failure}); failed trajectories are left out of training")
        if not t.prompt_ids:
            raise ValueError(f"{name} has no prompt tokens: its first response token has nothing to condition on")
        if not len(t.response_ids) == len(t.loss_mask) == len(t.logprobs):
            raise ValueError(
                f"{name}: response_ids, loss_mask and logprobs differ in length "
                f"({len(t.response_ids)}, {len(t.loss_mask)}, {len(t.logprobs)})"
            )
    length = max(2, max(len(t.prompt_ids) + len(t.response_ids) for t in trajectories))
    b = len(trajectories)
    input_ids = torch.full((b, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((b, length), dtype=torch.long)
    loss_mask = torch.zeros((b, length - 1), dtype=torch.float32)
    old_logprobs = torch.zeros((b, length - 1), dtype=torch.float32)
    for i, t in enumerate(trajectories):
        p, n = len(t.prompt_ids), len(t.response_ids)
        input_ids[i, : p + n] = torch.tensor(t.prompt_ids + t.response_ids, dtype=torch.long)
        attention_mask[i, : p + n] = 1
        # Response token j sits at position p + j and is predicted from column p + j - 1.
        mask = torch.tensor(t.loss_mask, dtype=torch.float32)
        loss_mask[i, p - 1 : p - 1 + n] = mask
        old_logprobs[i, p - 1 : p - 1 + n] = torch.tensor(t.logprobs, dtype=torch.float32) * mask
    return RLBatch(input_ids, attention_mask, loss_mask, old_logprobs, torch.tensor(advantages, dtype=torch.float32))


def micro_batches(batch: RLBatch, size: int) -> Iterator[RLBatch]:
    """Consecutive groups of `size` rows (the last may be smaller), each cut to its own length."""
    if size < 1:
        raise ValueError(f"micro-batch size must be at least 1, got {size}")
    rows = batch.input_ids.size(0)
    for start in range(0, rows, size):
        yield batch.rows(start, min(start + size, rows))


def token_logprobs(model: torch.nn.Module, input_ids: Tensor, attention_mask: Tensor, temperature: float) -> Tensor:
    """[B, L-1] log p(token t+1 | tokens 0..t) of `softmax(logits / temperature)`, in float32.

    The temperature is the sampling one, as in TRL and verl, so that the ratio compares the
    distribution the tokens were drawn from. `model` is called as a whole (it may be a
    DDP/DeepSpeed wrapper whose forward must run for gradients to be synchronised).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1]
    logits = logits.float() / temperature
    targets = input_ids[:, 1:].unsqueeze(-1)
    return logits.gather(-1, targets).squeeze(-1) - logits.logsumexp(-1)


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    clip_low: float,
    clip_high: float,
    loss_tokens_total: int,
    dp_world_size: int = 1,
    token_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """This micro-batch's share of the step's token-mean clipped loss, and its summed statistics.

    logprobs, old_logprobs, loss_mask: [B, T]; advantages: [B]. `loss_tokens_total` counts
    the loss tokens of the whole optimizer step on every process. Summed over micro-batches
    and processes, the returned losses are the global token mean. DDP and ZeRO average
    gradients over processes, so the loss is multiplied by `dp_world_size` for the averaged
    gradient to be that of the global mean (TRL's dapo normaliser divides by num_processes
    for the same reason). Statistics are sums over this micro-batch's loss tokens, unscaled:
    add them up over the step and divide by `loss_tokens_total`. `token_weights` ([B, T],
    no gradient): per-token factors of the loss, the truncated importance weights of TIS.
    """
    if loss_tokens_total < 1:
        raise ValueError(f"loss_tokens_total must be at least 1, got {loss_tokens_total}")
    mask = loss_mask.to(logprobs.dtype)
    # Zero the log-ratio off the mask before exp: padding and tool tokens hold arbitrary
    # values, and exp(large) * 0 would be nan in the loss and its gradient.
    log_ratio = torch.where(mask > 0, logprobs - old_logprobs, torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    adv = advantages.to(logprobs.dtype).unsqueeze(-1)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    # max of the negated objectives = min of the objectives: the pessimistic bound of PPO.
    per_token = torch.maximum(unclipped, clipped)
    if token_weights is not None:
        per_token = per_token * token_weights.detach().to(per_token.dtype)
    token_sum = (per_token * mask).sum()
    loss = token_sum * (dp_world_size / loss_tokens_total)
    with torch.no_grad():
        # Tokens whose gradient the clip removed, split as TRL and verl log them.
        low = (mask > 0) & (ratio < 1.0 - clip_low) & (adv < 0)
        high = (mask > 0) & (ratio > 1.0 + clip_high) & (adv > 0)
        stats = {
            "loss_tokens": float(mask.sum()),
            "loss_sum": float(token_sum),
            "ratio_sum": float((ratio * mask).sum()),
            "ratio_sq_sum": float((ratio.square() * mask).sum()),
            # Extremes over the loss tokens (+inf / -inf when there are none).
            "ratio_min": float(torch.where(mask > 0, ratio, torch.full_like(ratio, float("inf"))).min()),
            "ratio_max": float(torch.where(mask > 0, ratio, torch.full_like(ratio, float("-inf"))).max()),
            "clipped_low": float(low.sum()),
            "clipped_high": float(high.sum()),
            "clipped_tokens": float((low | high).sum()),
            # k3 estimator of KL(old || new): shows engine/trainer mismatch when old = engine.
            "kl_sum": float(((ratio - 1.0 - log_ratio) * mask).sum()),
        }
    return loss, stats


@torch.no_grad()
def recompute_old_logprobs(model: torch.nn.Module, batch: RLBatch, temperature: float, micro_batch: int) -> RLBatch:
    """The batch with old log-probs from the current policy (the trainer, before the update)."""
    old = torch.zeros_like(batch.old_logprobs)
    rows = batch.input_ids.size(0)
    for start in range(0, rows, micro_batch):
        part = batch.rows(start, min(start + micro_batch, rows))
        lp = token_logprobs(model, part.input_ids, part.attention_mask, temperature).float()
        old[start : start + part.input_ids.size(0), : lp.size(1)] = lp * part.loss_mask
    return replace(batch, old_logprobs=old)


def with_old_logprobs(
    batch: RLBatch, source: OldLogprobSource, model: torch.nn.Module, temperature: float, micro_batch: int
) -> RLBatch:
    """Old log-probs by config name: `engine` keeps the sampling log-probs, `recompute` replaces them."""
    if source == "engine":
        return batch
    if source == "recompute":
        return recompute_old_logprobs(model, batch, temperature, micro_batch)
    raise ValueError(f"unknown old log-prob source {source!r}; choose 'recompute' or 'engine'")
