"""Exact sampling on the real Qwen3 vocabulary (issue 9): draws follow the reported distribution."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import chisquare

from rollout.engines.base import SamplingParams
from rollout.engines.decode_batch import inverse_cdf, processed_logprobs, sample

VOCAB = 151_936  # Qwen3's embedding rows
DRAWS = 2_000_000
BINS = 16


def _logits(kind: str, seed: int = 0) -> tuple[torch.Tensor, int]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(1, VOCAB, generator=g)
    top = VOCAB // 3
    if kind == "peaked":
        logits[0, top] = 18.0  # ~99.7 % on one token at T = 1, the tail spread over 151,935
    else:
        logits *= 0.1
    return logits, top


def _old_float32_draw(logits: torch.Tensor, temperature: float, u: torch.Tensor) -> torch.Tensor:
    """The sampler this replaced: a float32 running sum over the vocabulary (top_p = 1)."""
    probs = torch.softmax(logits / temperature, -1)
    cdf = probs.cumsum(-1)
    return torch.searchsorted(cdf, (u.float() * cdf[:, -1:]).contiguous(), right=False).clamp(max=VOCAB - 1)


def _chi2_pvalue(tokens: torch.Tensor, probs: torch.Tensor, top: int) -> float:
    """Chi-square of draws against probabilities: the top token alone, the rest in 16 groups by probability.

    Grouping by probability, not by index, is what exposes a sampler that rounds each small
    token's share to 0 or to a whole float32 step: the total stays right, the groups do not.
    """
    rank = torch.empty(VOCAB, dtype=torch.long)
    rank[probs.argsort()] = torch.arange(VOCAB)
    groups = rank * BINS // VOCAB + 1
    groups[top] = 0
    observed = torch.bincount(groups[tokens], minlength=BINS + 1).double()
    expected = torch.zeros(BINS + 1, dtype=torch.float64).index_add_(0, groups, probs) * len(tokens)
    return float(chisquare(observed.numpy(), expected.numpy() * observed.sum().item() / expected.sum().item()).pvalue)


def _implied_distribution(draw) -> torch.Tensor:
    """The exact distribution of an inverse-CDF sampler, measured as a black box.

    `draw` maps uniforms (1, k) to tokens, monotonically; token i is drawn for u in
    [b_i, b_i+1), where b_i is the least u that draws a token >= i: found for every token
    at once by bisection, so the share of [0, 1) each token gets is measured, not assumed.
    """
    targets = torch.arange(VOCAB + 1)
    lo, hi = torch.zeros(VOCAB + 1, dtype=torch.float64), torch.ones(VOCAB + 1, dtype=torch.float64)
    for _ in range(64):
        mid = (lo + hi) / 2
        at_least = draw(mid[None])[0] >= targets
        hi, lo = torch.where(at_least, mid, hi), torch.where(at_least, lo, mid)
    hi = torch.where(draw(torch.zeros(1, VOCAB + 1, dtype=torch.float64))[0] >= targets, 0.0, hi)
    return torch.diff(hi)


@pytest.mark.parametrize("kind", ["peaked", "flat"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_draws_match_the_reported_probabilities(kind, temperature):
    logits, top = _logits(kind)
    logp = processed_logprobs(logits, torch.tensor([temperature]), torch.tensor([1.0]))
    probs = logp.exp()[0]
    assert abs(probs.sum().item() - 1) < 1e-12
    u = torch.rand(1, DRAWS, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert _chi2_pvalue(inverse_cdf(logp, u)[0], probs, top) > 1e-3  # seeded draws
    implied = _implied_distribution(lambda v: inverse_cdf(logp, v))
    assert 0.5 * (implied - probs).abs().sum() < 1e-9  # total variation, every token counted


def test_the_old_float32_sampler_fails_the_same_bound():
    """The sampler this replaced, a float32 running sum: most of the tail after the top token
    can never be drawn, and the tail tokens that can are drawn several times too often."""
    logits, top = _logits("peaked")
    probs = torch.softmax(logits.double(), -1)[0]
    implied = _implied_distribution(lambda v: _old_float32_draw(logits, 1.0, v))
    assert 0.5 * (implied - probs).abs().sum() > 1e-4
    tail = slice(top + 1, None)
    assert (implied[tail] == 0).double().mean() > 0.5
    assert (implied[tail] / probs[tail]).max() > 3


def test_top_p_keeps_exactly_the_nucleus_and_reports_its_renormalised_probabilities():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(1, VOCAB, generator=g) * 0.5
    head = torch.randperm(VOCAB, generator=g)[:40]
    logits[0, head] = 9.0 + torch.linspace(0, 2, 40)
    top_p = 0.8
    logp = processed_logprobs(logits, torch.tensor([1.0]), torch.tensor([top_p]))
    full = torch.log_softmax(logits.double(), -1)[0]
    order = full.argsort(descending=True)
    mass_before = full[order].exp().cumsum(0) - full[order].exp()
    nucleus = set(order[mass_before < top_p].tolist())  # smallest prefix reaching top_p
    kept = set(torch.nonzero(torch.isfinite(logp[0])).flatten().tolist())
    assert kept == nucleus and 1 < len(nucleus) < 40
    mass = full[list(nucleus)].exp().sum()
    for token in nucleus:
        assert logp[0, token].item() == pytest.approx((full[token] - mass.log()).item(), abs=1e-12)
    implied = _implied_distribution(lambda v: inverse_cdf(logp, v))
    assert 0.5 * (implied - logp[0].exp()).abs().sum() < 1e-9
    assert set(torch.nonzero(implied).flatten().tolist()) == nucleus
    tokens = inverse_cdf(logp, torch.rand(1, DRAWS, generator=g, dtype=torch.float64))[0]
    assert set(tokens.unique().tolist()) == nucleus
    ids = sorted(nucleus)
    observed = torch.stack([(tokens == i).sum() for i in ids]).double().numpy()
    expected = logp[0, ids].exp().numpy() * DRAWS
    assert chisquare(observed, expected).pvalue > 1e-3


def test_sample_uses_each_rows_generator_and_reports_the_drawn_tokens_log_prob():
    logits, _ = _logits("peaked")
    logits = torch.cat([logits, _logits("flat", 5)[0], logits])
    params = [SamplingParams(1, temperature=0.7, seed=1), SamplingParams(1, top_p=0.9, seed=2), SamplingParams(1, 0.0)]
    gens = [torch.Generator().manual_seed(p.seed or 0) for p in params]
    tokens, lps = sample(logits, params, gens)
    temps, top_p = torch.tensor([0.7, 1.0, 0.0], dtype=torch.float64), torch.tensor([1.0, 0.9, 1.0])
    logp = processed_logprobs(logits, temps, top_p.double())
    for row, p in enumerate(params[:2]):
        u = torch.rand((1, 1), generator=torch.Generator().manual_seed(p.seed), dtype=torch.float64)
        assert tokens[row] == inverse_cdf(logp[row : row + 1], u)[0, 0]
        assert lps[row].item() == pytest.approx(logp[row, tokens[row]].item(), abs=1e-12)
    assert tokens[2] == logits[2].argmax() and math.isfinite(lps[2].item())
