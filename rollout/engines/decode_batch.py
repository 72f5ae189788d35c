"""Rows decoding together over one KV cache: the hf engine's batch, padded or continuous.

Our own loop rather than `model.generate`, so one batch can mix requests with different
seeds, temperatures, top-p, stop tokens and budgets; rows that finish leave the batch and
its cache at once; and new rows can join between steps (continuous batching: prefilled
on their own, then left-padded into the cache). It reproduces `generate`'s greedy output
exactly (tests/rollout/test_hf_engine.py).

Sampling is exact: each token is drawn, in float64, from the distribution whose log-prob
is reported (logits / temperature, then the top-p nucleus renormalised), which is what
RL's importance ratios need. With top_p = 1 that equals the log-softmax a trainer
recomputes at the same temperature; with top_p < 1 it is the truncated distribution.
Greedy (temperature 0) reports the log-softmax of the raw logits.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Hashable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from rollout.engines.base import GenerationResult, SamplingParams


@dataclass
class _Row:
    key: Hashable  # the caller's handle for this request
    params: SamplingParams
    generator: torch.Generator
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


def processed_logprobs(logits: torch.Tensor, temperatures: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Float64 log-probs of the distribution each row samples from: logits / T, then top-p.

    Top-p keeps the nucleus, the smallest set of most likely tokens whose mass reaches
    `top_p`, renormalised; every other token gets -inf. Greedy rows (T <= 0) report the
    log-softmax of the raw logits. Float64 throughout: in float32 a 151,936-token tail
    under one dominant token sums to nonsense (issue 9).
    """
    greedy = temperatures <= 0
    scale = torch.where(greedy, 1.0, temperatures).to(torch.float64)
    logp = torch.log_softmax(logits.to(torch.float64) / scale[:, None], dim=-1)
    truncate = (top_p < 1) & ~greedy
    if bool(truncate.any()):
        sorted_lp, order = logp.sort(dim=-1, descending=True)
        sorted_p = sorted_lp.exp()
        before = sorted_p.cumsum(-1) - sorted_p  # mass ranked strictly above each token
        keep_sorted = (before < top_p.to(torch.float64)[:, None]) | ~truncate[:, None]
        keep_sorted[:, 0] = True
        log_mass = torch.log((sorted_p * keep_sorted).sum(-1))
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        logp = torch.where(keep, logp - torch.where(truncate, log_mass, 0.0)[:, None], -torch.inf)
    return logp


def inverse_cdf(logp: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Tokens drawn from float64 log-probs (rows, vocab) by float64 uniforms (rows, k) in [0, 1).

    A token of probability 0 is never returned; one of probability p is returned for a
    share p of the unit interval, up to float64 rounding of the running sum.
    """
    probs = logp.exp()
    cdf = probs.cumsum(-1)
    drawn = torch.searchsorted(cdf, uniforms * cdf[:, -1:], right=True).clamp(max=probs.shape[-1] - 1)
    # u * total can round up to total (probability ~2^-53): then take the last token that has mass.
    empty = probs.gather(-1, drawn) == 0
    if bool(empty.any()):
        last = probs.shape[-1] - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(-1)
        drawn = torch.where(empty, last[:, None], drawn)
    return drawn


def sample(
    logits: torch.Tensor, params: list[SamplingParams], gens: list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row from logits (rows, vocab); returns (tokens, log-probs of those tokens).

    The log-prob is that of the distribution the token was drawn from (processed_logprobs).
    """
    temps = torch.tensor([p.temperature for p in params], dtype=torch.float64)
    top_p = torch.tensor([p.top_p for p in params], dtype=torch.float64)
    logp = processed_logprobs(logits, temps, top_p)
    # One uniform per row from the row's own generator: a row's samples do not depend on
    # which other requests share its batch.
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in gens])
    drawn = inverse_cdf(logp, u[:, None]).squeeze(-1)
    tokens = torch.where(temps <= 0, logits.argmax(-1), drawn)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def _full_attention(cache: DynamicCache) -> bool:
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    missing = width - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=t.dtype, device=t.device), t], dim=dim)


class DecodeBatch:
    """Call `add` to start requests and `step` to advance every row one token."""

    def __init__(self, model: torch.nn.Module, pad_token_id: int) -> None:
        self.model = model
        self.pad = pad_token_id
        # The model's tensors live on its device; sampling runs on the CPU with per-row CPU
        # generators, so a seed draws the same tokens wherever the model runs.
        self.device = next(model.parameters()).device
        # transformers renamed `past_key_values` to `cache` (5.2x); an older one ignores `cache`
        # without a word and decodes every token as if the prompt were gone.
        self.cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.rows: list[_Row] = []
        self.cache: DynamicCache | None = None
        self.attention = self._long((0, 0))  # (rows, cache width): 0 on padding
        self.next_pos = self._long((0,))  # position of each row's next token
        self.logits = torch.zeros((0, 0))  # (rows, vocab), on the CPU: distribution of each row's next token

    def _long(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.zeros(shape, dtype=torch.long, device=self.device)

    def __len__(self) -> int:
        return len(self.rows)

    @torch.inference_mode()
    def add(self, requests: list[tuple[Hashable, list[int], SamplingParams]]) -> None:
        """Prefill new rows (left-padded among themselves) and merge them into the batch."""
        width = max(len(ids) for _, ids, _ in requests)
        input_ids = torch.full((len(requests), width), self.pad, dtype=torch.long)
        attention = torch.zeros((len(requests), width), dtype=torch.long)
        for i, (_, ids, _) in enumerate(requests):
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[i, width - len(ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        cache = DynamicCache(config=self.model.config)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        # logits_to_keep=1: only the next-token distribution (full prompt logits would be rows x length x vocab)
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                         logits_to_keep=1, **{self.cache_kw: cache})
        logits = out.logits[:, -1].float().cpu()
        rows = [
            _Row(key, p, torch.Generator().manual_seed(p.seed if p.seed is not None else random.getrandbits(62)))
            for key, _, p in requests
        ]
        if self.cache is None:
            self.cache, self.attention, self.logits = cache, attention, logits
        else:
            self._merge(cache, attention)
            self.logits = torch.cat([self.logits, logits])
        self.rows += rows
        self.next_pos = torch.cat([self.next_pos, attention.sum(-1)])

    def _merge(self, cache: DynamicCache, attention: torch.Tensor) -> None:
        width = max(self.attention.shape[1], attention.shape[1])
        if not _full_attention(self.cache):
            raise NotImplementedError("joining a running batch needs full-attention cache layers only")
        for old, new in zip(self.cache.layers, cache.layers, strict=True):
            old.keys = torch.cat([_left_pad(old.keys, width, 2), _left_pad(new.keys, width, 2)])
            old.values = torch.cat([_left_pad(old.values, width, 2), _left_pad(new.values, width, 2)])
        self.attention = torch.cat([_left_pad(self.attention, width, 1), _left_pad(attention, width, 1)])

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, GenerationResult]]:
        """Sample one token for every row; returns the rows that finished (and drops them)."""
        tokens, lps = sample(self.logits, [r.params for r in self.rows], [r.generator for r in self.rows])
        keep, finished = [], []
        for j, row in enumerate(self.rows):
            token = int(tokens[j])
            row.output_ids.append(token)
            row.logprobs.append(float(lps[j]))
            if token in row.params.stop_token_ids:
                finished.append((row.key, GenerationResult(row.output_ids, row.logprobs, "stop", token)))
            elif len(row.output_ids) >= row.params.max_new_tokens:
                finished.append((row.key, GenerationResult(row.output_ids, row.logprobs, "length")))
            else:
                keep.append(j)
        if len(keep) < len(self.rows):
            self._select(keep)
            tokens = tokens[keep]
        if self.rows:
            ones = torch.ones((len(self.rows), 1), dtype=torch.long, device=self.device)
            self.attention = torch.cat([self.attention, ones], dim=-1)
            out = self.model(
                input_ids=tokens[:, None].to(self.device),
                attention_mask=self.attention,
                position_ids=self.next_pos[:, None],
                logits_to_keep=1,
                **{self.cache_kw: self.cache},
            )
            self.logits = out.logits[:, -1].float().cpu()
            self.next_pos = self.next_pos + 1
        return finished

    def drop(self, keys: set[Hashable]) -> None:
        """Remove rows whose caller went away (a cancelled request), freeing their cache."""
        keep = [j for j, row in enumerate(self.rows) if row.key not in keys]
        if len(keep) < len(self.rows):
            self._select(keep)

    def _select(self, keep: list[int]) -> None:
        self.rows = [self.rows[j] for j in keep]
        if not keep:  # empty: start the next add from scratch
            self.cache, self.attention = None, self._long((0, 0))
            self.next_pos, self.logits = self._long((0,)), torch.zeros((0, 0))
            return
        index = torch.tensor(keep, dtype=torch.long)
        on_device = index.to(self.device)
        self.cache.batch_select_indices(on_device)
        self.attention, self.next_pos = self.attention[on_device], self.next_pos[on_device]
        self.logits = self.logits[index]
        lead = int(self.attention.any(0).int().argmax())  # columns that are padding in every row left
        if lead > 0 and _full_attention(self.cache):  # no left crop in transformers: slice the tensors
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, lead:], layer.values[:, :, lead:]
            self.attention = self.attention[:, lead:]


def decode_batch(
    model: torch.nn.Module, prompts: list[list[int]], params: list[SamplingParams], pad_token_id: int
) -> list[GenerationResult]:
    """Generate for every prompt at once (padded batching): the whole batch, start to finish."""
    batch = DecodeBatch(model, pad_token_id)
    batch.add([(i, p, s) for i, (p, s) in enumerate(zip(prompts, params, strict=True))])
    results: dict[Hashable, GenerationResult] = {}
    while batch:
        results.update(batch.step())
    return [results[i] for i in range(len(prompts))]
