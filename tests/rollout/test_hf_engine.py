"""The local transformers engine: exact greedy decoding, seeds, stops, log-probs, batching."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from configs.rollout import RolloutConfig
from rollout.engines.base import Engine, SamplingParams, build_engines
from rollout.engines.hf import HFEngine, decode_batch

PAD = 4070


@pytest.fixture(scope="module")
def model(tiny_assets):
    return AutoModelForCausalLM.from_pretrained(tiny_assets.model).eval()


@pytest.fixture(scope="module")
def prompts(small_fmt):
    texts = ["What is 2 + 2?", "a", "The quick brown fox jumps over the lazy dog, twice."]
    return [small_fmt.encode(t) for t in texts]


def test_greedy_batch_matches_transformers_generate(model, prompts):
    budgets = [5, 17, 30]
    results = decode_batch(model, prompts, [SamplingParams(n, temperature=0.0) for n in budgets], PAD)
    for p, n, r in zip(prompts, budgets, results, strict=True):
        reference = model.generate(torch.tensor([p]), max_new_tokens=n, do_sample=False, eos_token_id=None)
        assert r.output_ids == reference[0, len(p) :].tolist()
        assert r.finish_reason == "length" and len(r.logprobs) == n


class _OlderForward(torch.nn.Module):
    """A model as transformers before 5.2x calls its cache argument (`past_key_values`); such a
    model ignores `cache=`, which decoded every token after the first as if the prompt were gone."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None, logits_to_keep=0, **unused):
        assert not unused, f"unexpected arguments {sorted(unused)}"
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          cache=past_key_values, logits_to_keep=logits_to_keep)


def test_the_cache_reaches_a_model_that_calls_it_past_key_values(model, prompts):
    params = [SamplingParams(12, temperature=0.0) for _ in prompts]
    assert [r.output_ids for r in decode_batch(_OlderForward(model), prompts, params, PAD)] == \
        [r.output_ids for r in decode_batch(model, prompts, params, PAD)]


def test_seeded_samples_do_not_depend_on_the_batch(model, prompts):
    params = [SamplingParams(24, temperature=1.0, seed=100 + i) for i in range(3)]
    together = decode_batch(model, prompts, params, PAD)
    alone = decode_batch(model, prompts[2:], params[2:], PAD)
    assert together[2].output_ids == alone[0].output_ids
    again = decode_batch(model, prompts[:1], [SamplingParams(24, temperature=1.0, seed=101)], PAD)
    assert again[0].output_ids != together[0].output_ids  # another seed, another sample


def test_logprobs_are_the_sampling_distribution(model, prompts):
    temperature = 0.7
    (r,) = decode_batch(model, prompts[:1], [SamplingParams(16, temperature=temperature, seed=3)], PAD)
    ids = torch.tensor([prompts[0] + r.output_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompts[0]) - 1 : -1].float() / temperature
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(r.output_ids)[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(r.logprobs), expected, atol=1e-4)


def test_stop_token_ends_the_row_and_is_returned(model, prompts):
    (greedy,) = decode_batch(model, prompts[:1], [SamplingParams(8, temperature=0.0)], PAD)
    stop = greedy.output_ids[3]
    first = greedy.output_ids.index(stop)
    (r,) = decode_batch(model, prompts[:1], [SamplingParams(8, temperature=0.0, stop_token_ids=(stop,))], PAD)
    assert r.finish_reason == "stop" and r.output_ids == greedy.output_ids[: first + 1]


def test_tiny_top_p_is_greedy(model, prompts):
    (greedy,) = decode_batch(model, prompts[1:2], [SamplingParams(12, temperature=0.0)], PAD)
    (nucleus,) = decode_batch(model, prompts[1:2], [SamplingParams(12, temperature=1.0, top_p=1e-6, seed=9)], PAD)
    assert nucleus.output_ids == greedy.output_ids


async def test_concurrent_requests_share_a_batch(tiny_assets, prompts):
    (engine,) = build_engines(RolloutConfig(hf_batch_window_s=0.05), tiny_assets.model)
    assert isinstance(engine, Engine) and engine.kv_capacity_tokens() == RolloutConfig().hf_kv_capacity_tokens
    params = [SamplingParams(10, temperature=1.0, seed=i) for i in range(3)]
    try:
        results = await asyncio.gather(*(engine.generate(p, s) for p, s in zip(prompts, params, strict=True)))
    finally:
        await engine.aclose()
    assert engine.stats.batch_sizes == [3] and engine.stats.output_tokens == 30
    direct = decode_batch(engine._model, prompts, params, PAD)
    assert [r.output_ids for r in results] == [d.output_ids for d in direct]


async def test_update_weights_changes_the_policy(tiny_assets, tmp_path, prompts):
    engine = HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=1000)
    params = SamplingParams(12, temperature=0.0)
    before = await engine.generate(prompts[0], params)
    changed = AutoModelForCausalLM.from_pretrained(tiny_assets.model)
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    changed.save_pretrained(tmp_path)
    await engine.update_weights(str(tmp_path))
    after = await engine.generate(prompts[0], params)
    await engine.aclose()
    assert after.output_ids != before.output_ids


def test_rows_joining_a_running_batch_decode_as_if_alone(model, prompts):
    from rollout.engines.decode_batch import DecodeBatch

    params = [
        SamplingParams(20, temperature=0.0),
        SamplingParams(9, temperature=1.0, seed=4),
        SamplingParams(15, temperature=0.0),
    ]
    alone = [decode_batch(model, [p], [s], PAD)[0] for p, s in zip(prompts, params, strict=True)]
    batch = DecodeBatch(model, PAD)
    batch.add([(0, prompts[0], params[0])])
    finished = {}
    for step in range(40):
        if step == 3:
            batch.add([(1, prompts[1], params[1])])  # shorter prompt than the cache: left-padded in
        if step == 6:
            batch.add([(2, prompts[2], params[2])])  # longer: the running rows get padded
        finished.update(batch.step())
        if not batch and len(finished) == 3:
            break
    assert [finished[i].output_ids for i in range(3)] == [a.output_ids for a in alone]
    for i in range(3):
        assert finished[i].logprobs == pytest.approx(alone[i].logprobs, abs=1e-4)
    assert batch.cache is None  # everything left: the cache is gone too


async def test_continuous_engine_answers_short_requests_while_a_long_one_runs(tiny_assets, prompts):
    cfg = RolloutConfig(hf_batching="continuous", hf_batch_window_s=0.0)
    (engine,) = build_engines(cfg, tiny_assets.model)
    long = asyncio.create_task(engine.generate(prompts[0], SamplingParams(400, temperature=0.0)))
    await asyncio.sleep(0.05)
    short = await engine.generate(prompts[1], SamplingParams(5, temperature=1.0, seed=1))
    assert not long.done()  # the short request joined and left while the long one kept decoding
    result = await long
    await engine.aclose()
    assert len(result.output_ids) == 400 and len(short.output_ids) == 5
    assert short.output_ids == decode_batch(engine._model, prompts[1:2], [SamplingParams(5, seed=1)], PAD)[0].output_ids


@pytest.fixture(scope="module")
def eos_model(tiny_assets, tmp_path_factory, prompts):
    """The tiny model with a generation config that names an extra end-of-text id, as Qwen3-Base's does;
    the id is the 4th token greedy decoding emits, so generation meets it."""
    model = AutoModelForCausalLM.from_pretrained(tiny_assets.model).eval()
    (greedy,) = decode_batch(model, prompts[:1], [SamplingParams(8, temperature=0.0)], PAD)
    eos = greedy.output_ids[3]
    first = greedy.output_ids.index(eos)
    model.generation_config.eos_token_id = [model.config.eos_token_id, eos]
    path = tmp_path_factory.mktemp("eos-model")
    model.save_pretrained(path)
    return str(path), eos, greedy.output_ids[: first + 1]


async def test_engine_stops_on_the_models_generation_config_eos(eos_model, prompts):
    path, eos, expected = eos_model
    engine = HFEngine.from_pretrained(path, kv_capacity_tokens=1000)
    assert eos in engine.eos_ids
    stopped = await engine.generate(prompts[0], SamplingParams(8, temperature=0.0))
    ignored = await engine.generate(prompts[0], SamplingParams(8, temperature=0.0, ignore_eos=True))
    await engine.aclose()
    assert (stopped.output_ids, stopped.finish_reason, stopped.stop_token_id) == (expected, "stop", eos)
    assert len(ignored.output_ids) == 8 and ignored.finish_reason == "length" and ignored.stop_token_id is None


async def test_a_cancelled_request_leaves_the_running_batch(tiny_assets, prompts):
    (engine,) = build_engines(RolloutConfig(hf_batch_window_s=0.0), tiny_assets.model)
    params = SamplingParams(5000, temperature=1.0, seed=1, ignore_eos=True)
    doomed = asyncio.create_task(engine.generate(prompts[0], params))
    other = asyncio.create_task(engine.generate(prompts[1], SamplingParams(5000, seed=2, ignore_eos=True)))
    await asyncio.sleep(0.2)
    assert engine.inflight == 2
    doomed.cancel()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if engine.inflight == 1:
            break
    assert engine.inflight == 1 and not other.done()  # the other row keeps decoding
    other.cancel()
    await engine.aclose()


def _perturbed(path: str) -> torch.nn.Module:
    changed = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(0)) * 0.5)
    return changed.eval()


@pytest.mark.parametrize("continuous", [True, False])
async def test_new_weights_land_between_requests_and_each_answer_says_which(tiny_assets, prompts, continuous):
    """Requests keep arriving while the weights change: none is dropped, each is answered
    wholly by the old weights or wholly by the new (greedy, so each output is one model's own),
    and its `weight_version` says which. The swap waits for the running requests."""
    old = AutoModelForCausalLM.from_pretrained(tiny_assets.model).eval()
    new = _perturbed(tiny_assets.model)
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(tiny_assets.model), pad_token_id=PAD,
                      kv_capacity_tokens=10_000, continuous=continuous, eos_ids=())
    params = SamplingParams(24, temperature=0.0)
    expected = {v: {tuple(p): tuple(decode_batch(m, [p], [params], PAD)[0].output_ids) for p in prompts}
                for v, m in ((0, old), (7, new))}
    assert expected[0] != expected[7]

    async def client(k: int):
        await asyncio.sleep(0.002 * k)
        prompt = prompts[k % len(prompts)]
        return prompt, await engine.generate(prompt, params)

    try:
        requests = [asyncio.create_task(client(k)) for k in range(24)]
        await asyncio.sleep(0.01)
        running = engine.inflight
        await engine.load_state_dict(new.state_dict(), version=7)
        swapped_after = sum(r.done() for r in requests)
        results = await asyncio.gather(*requests)
    finally:
        await engine.aclose()
    assert running > 0  # the swap came while requests were decoding
    versions = [r.weight_version for _, r in results]
    assert set(versions) == {0, 7} and engine.weight_version == 7
    for prompt, r in results:
        assert tuple(r.output_ids) == expected[r.weight_version][tuple(prompt)]
    assert versions.count(0) <= swapped_after  # every old answer was given before the swap returned
