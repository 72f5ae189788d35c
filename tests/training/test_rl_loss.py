"""training/rl_loss.py: hand-computed clipped loss, micro-batch and process invariance, batch alignment.

The helpers at the top (tiny model, random trajectories) are shared with test_rl_loss_trl.py.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from rollout.prompt import ChatFormat, tool_call_text
from rollout.trajectory import Trajectory
from training.rl_loss import (
    RLBatch,
    make_batch,
    micro_batches,
    policy_loss,
    token_logprobs,
    with_old_logprobs,
)

CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # configs/schema.py RLConfig defaults (SPEC §6 step 6)
TEMPERATURE = 0.7  # not 1, so that a missing or doubled temperature would show


def tiny_model(vocab_size: int = 64, pad_id: int = 0, seed: int = 0) -> Qwen3ForCausalLM:
    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, intermediate_size=64, tie_word_embeddings=True, pad_token_id=pad_id,
    )  # fmt: skip
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).float()


def random_trajectories(
    model: torch.nn.Module, n: int, prompt_len: int | None, seed: int, vocab_size: int, pad_id: int = 0
) -> list[Trajectory]:
    """Trajectories of alternating model and tool spans; engine log-probs = current policy + noise.

    The noise (±0.8 nats) puts ratios on both sides of both clip bounds. `prompt_len=None`
    draws each prompt's length.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = [rng.randrange(1, vocab_size) for _ in range(prompt_len or rng.randint(2, 7))]
        t = Trajectory(problem_index=i // 2, sample_index=i % 2, prompt_ids=prompt, finish_reason="stop")
        for span in range(rng.randint(1, 4)):
            mask = 1 if span % 2 == 0 else 0  # model turn, tool feedback, model turn, ...
            t.append([rng.randrange(1, vocab_size) for _ in range(rng.randint(1, 8))], mask)
        ids = torch.tensor([t.prompt_ids + t.response_ids])
        with torch.no_grad():
            current = token_logprobs(model, ids, torch.ones_like(ids), TEMPERATURE)[0, len(prompt) - 1 :]
        t.logprobs = [(lp + rng.uniform(-0.8, 0.8)) * m for lp, m in zip(current.tolist(), t.loss_mask, strict=True)]
        out.append(t)
    return out


def random_advantages(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [(-1) ** i * rng.uniform(0.3, 2.0) for i in range(n)]  # both signs, as in a kept group


def loss_and_grads(model, batch: RLBatch, size: int, total: int, world: int = 1) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad()
    loss_sum = 0.0
    for part in micro_batches(batch, size):
        lp = token_logprobs(model, part.input_ids, part.attention_mask, TEMPERATURE)
        loss, _ = policy_loss(lp, part.old_logprobs, part.advantages, part.loss_mask, CLIP_LOW, CLIP_HIGH, total, world)
        loss.backward()
        loss_sum += loss.item()
    return loss_sum, [p.grad.clone() for p in model.parameters()]


# 1. Hand-computed values ------------------------------------------------------------------


def test_clipped_loss_matches_hand_computation():
    # Row 0, advantage +1: ratios 0.5 (below 0.8: min keeps 0.5, gradient flows), 1.1
    # (inside), 1.5 (above 1.28: min takes the clipped 1.28, no gradient), a masked token.
    # Row 1, advantage -2: 0.5 (min takes the clipped -1.6, no gradient), 1.1, 1.5 (min
    # keeps the unclipped -3, gradient flows), 0.9 (inside).
    ratios = torch.tensor([[0.5, 1.1, 1.5, 1.0], [0.5, 1.1, 1.5, 0.9]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    old = torch.tensor([[-1.0, -2.0, -0.5, -1000.0], [-0.3, -1.2, -2.5, -0.7]])
    logprobs = (old + ratios.log()).clone()
    logprobs[0, 3] = 50.0  # garbage on a masked token: exp(1050) must not reach the loss
    logprobs.requires_grad_(True)
    adv = torch.tensor([1.0, -2.0])

    loss, stats = policy_loss(logprobs, old, adv, mask, CLIP_LOW, CLIP_HIGH, loss_tokens_total=7)
    objective = (0.5 + 1.1 + 1.28) + (-1.6 - 2.2 - 3.0 - 1.8)
    assert loss.item() == pytest.approx(-objective / 7, rel=1e-6)
    loss.backward()
    # d loss / d logprob = -A * ratio / 7 where the unclipped branch is active, else 0.
    expected = torch.tensor([[-0.5, -1.1, 0.0, 0.0], [0.0, 2 * 1.1, 2 * 1.5, 2 * 0.9]]) / 7
    torch.testing.assert_close(logprobs.grad, expected, rtol=1e-5, atol=1e-7)
    assert stats["loss_tokens"] == 7 and stats["clipped_low"] == stats["clipped_high"] == 1
    assert stats["clipped_tokens"] == 2
    assert stats["ratio_sum"] == pytest.approx(0.5 + 1.1 + 1.5 + 0.5 + 1.1 + 1.5 + 0.9, rel=1e-6)
    assert math.isfinite(stats["kl_sum"]) and stats["kl_sum"] > 0

    # The same tokens counted against a larger step total weigh proportionally less.
    half, _ = policy_loss(logprobs, old, adv, mask, CLIP_LOW, CLIP_HIGH, loss_tokens_total=14)
    assert half.item() == pytest.approx(loss.item() / 2, rel=1e-6)
    with pytest.raises(ValueError, match="loss_tokens_total"):
        policy_loss(logprobs, old, adv, mask, CLIP_LOW, CLIP_HIGH, loss_tokens_total=0)


# 2. Micro-batching and processes do not change the result ---------------------------------


@pytest.fixture(scope="module")
def model_and_batch():
    model = tiny_model()
    trajectories = random_trajectories(model, 6, None, seed=1, vocab_size=64)
    return model, make_batch(trajectories, random_advantages(6, seed=2), pad_id=0)


def test_micro_batching_keeps_loss_and_gradients(model_and_batch):
    model, batch = model_and_batch
    total = batch.loss_tokens
    full_loss, full_grads = loss_and_grads(model, batch, 6, total)
    assert abs(full_loss) > 1e-3
    for size in (1, 2, 4):
        loss, grads = loss_and_grads(model, batch, size, total)
        assert loss == pytest.approx(full_loss, rel=1e-5, abs=1e-7)
        for g, f in zip(grads, full_grads, strict=True):
            torch.testing.assert_close(g, f, rtol=1e-4, atol=1e-7)

    # The test can fail: a mean of micro-batch token means (unequal token counts) differs.
    mean_of_means = 0.0
    for part in micro_batches(batch, 2):
        lp = token_logprobs(model, part.input_ids, part.attention_mask, TEMPERATURE).detach()
        loss, _ = policy_loss(lp, part.old_logprobs, part.advantages, part.loss_mask, CLIP_LOW, CLIP_HIGH,
                              part.loss_tokens)  # fmt: skip
        mean_of_means += loss.item() / 3
    assert abs(mean_of_means - full_loss) > 1e-3


def test_data_parallel_average_of_gradients_is_the_global_mean(model_and_batch):
    # Two "processes" hold rows 0-1 and 2-5; DDP averages their gradients.
    model, batch = model_and_batch
    total = batch.loss_tokens
    full_loss, full_grads = loss_and_grads(model, batch, 6, total)
    loss_a, grads_a = loss_and_grads(model, batch.rows(0, 2), 1, total, world=2)
    loss_b, grads_b = loss_and_grads(model, batch.rows(2, 6), 2, total, world=2)
    assert (loss_a + loss_b) / 2 == pytest.approx(full_loss, rel=1e-5)
    for a, b, f in zip(grads_a, grads_b, full_grads, strict=True):
        torch.testing.assert_close((a + b) / 2, f, rtol=1e-4, atol=1e-7)


def test_recomputed_old_logprobs_give_ratio_one(model_and_batch):
    model, batch = model_and_batch
    assert with_old_logprobs(batch, "engine", model, TEMPERATURE, 2) is batch
    fresh = with_old_logprobs(batch, "recompute", model, TEMPERATURE, 2)
    assert not torch.allclose(fresh.old_logprobs, batch.old_logprobs)
    assert torch.all(fresh.old_logprobs[fresh.loss_mask == 0] == 0)
    for part in micro_batches(fresh, 2):
        lp = token_logprobs(model, part.input_ids, part.attention_mask, TEMPERATURE)
        loss, stats = policy_loss(lp, part.old_logprobs, part.advantages, part.loss_mask, CLIP_LOW, CLIP_HIGH, 1)
        assert stats["ratio_sum"] == pytest.approx(stats["loss_tokens"], rel=1e-6)
        assert stats["clipped_low"] == stats["clipped_high"] == 0
        assert loss.item() == pytest.approx(-(part.advantages[:, None] * part.loss_mask).sum().item(), rel=1e-5)
    with pytest.raises(ValueError, match="recompute"):
        with_old_logprobs(batch, "sampler", model, TEMPERATURE, 2)  # type: ignore[arg-type]


# 4. make_batch aligns prompt, response, mask and log-probs ---------------------------------


def test_make_batch_alignment_on_a_decoded_conversation(tiny_assets):
    fmt = ChatFormat(AutoTokenizer.from_pretrained(tiny_assets.tokenizer))
    pad = fmt.tokenizer.pad_token_id
    first = fmt.encode("Let me compute.\n" + tool_call_text("print(6*7)")) + [fmt.end_of_turn_id]
    feedback = fmt.feedback_ids(["42\n"])
    second = fmt.encode("<answer>\\boxed{42}</answer>") + [fmt.end_of_turn_id]
    long = Trajectory(0, 0, fmt.prompt_ids("What is 6*7?"), finish_reason="stop")
    long.append(first, 1, [-0.01 * (j + 1) for j in range(len(first))])
    long.append(feedback, 0)
    long.append(second, 1, [-1.0 - 0.01 * j for j in range(len(second))])
    # Truncated mid-turn (finish "length", reward 0): kept like any trajectory.
    cut = Trajectory(0, 1, fmt.prompt_ids("What is 6*7?"), finish_reason="length", reward=0.0)
    cut.append(first[:3], 1, [-0.5, -0.6, -0.7])

    batch = make_batch([long, cut], [0.5, -0.5], pad_id=pad)
    p, n = len(long.prompt_ids), len(long.response_ids)
    assert batch.input_ids.shape == (2, p + n) and batch.loss_mask.shape == batch.old_logprobs.shape == (2, p + n - 1)
    targets = batch.input_ids[:, 1:]
    on = batch.loss_mask[0] == 1
    assert fmt.decode(targets[0][on].tolist()) == fmt.decode(first) + fmt.decode(second)
    assert targets[0, : p - 1].tolist() == long.prompt_ids[1:] and not on[: p - 1].any()
    tool = ~on[p - 1 :]  # response positions without loss: exactly the tool feedback turn
    assert fmt.decode(targets[0, p - 1 :][tool].tolist()) == fmt.decode(feedback)
    assert batch.old_logprobs[0][on].tolist() == pytest.approx([x for x in long.logprobs if x != 0.0])
    assert torch.all(batch.old_logprobs[0][~on] == 0)

    q = len(cut.prompt_ids)
    assert batch.loss_mask[1].sum() == 3 and batch.loss_mask[1, q - 1 : q + 2].tolist() == [1, 1, 1]
    assert batch.old_logprobs[1, q - 1 : q + 2].tolist() == pytest.approx([-0.5, -0.6, -0.7])
    assert batch.attention_mask[1].sum() == q + 3 and torch.all(batch.input_ids[1, q + 3 :] == pad)
    assert batch.advantages.tolist() == [0.5, -0.5]
    moved = batch.to("cpu")
    assert all(torch.equal(getattr(moved, k), getattr(batch, k)) for k in ("input_ids", "loss_mask", "old_logprobs"))

    # A micro-batch of the short row alone is cut to its own length.
    short = list(micro_batches(batch, 1))[1]
    assert short.input_ids.shape == (1, q + 3) and short.loss_mask.shape == (1, q + 2)


def test_make_batch_refuses_bad_input():
    ok = Trajectory(3, 1, [1, 2], finish_reason="stop")
    ok.append([3, 4], 1, [-0.1, -0.2])
    failed = replace(ok, failure="engine unreachable")
    with pytest.raises(ValueError, match=r"problem 3, sample 1.*failed"):
        make_batch([failed], [1.0], pad_id=0)
    ragged = replace(ok, logprobs=[-0.1])
    with pytest.raises(ValueError, match=r"problem 3, sample 1.*differ in length"):
        make_batch([ragged], [1.0], pad_id=0)
    with pytest.raises(ValueError, match="advantages"):
        make_batch([ok], [1.0, 2.0], pad_id=0)
    with pytest.raises(ValueError, match="no prompt"):
        make_batch([replace(ok, prompt_ids=[])], [1.0], pad_id=0)
