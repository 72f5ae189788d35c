"""The SGLang client against the fake server (SGLang's native HTTP API backed by the hf engine)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from configs.rollout import RolloutConfig
from rollout.engines.base import Engine, SamplingParams, build_engines
from rollout.engines.fake_sglang import COUNTS, serve_in_thread
from rollout.engines.hf import HFEngine, decode_batch
from rollout.engines.sglang import SGLangEngine, parse_generation, sampling_payload


@pytest.fixture(scope="module")
def servers(tiny_assets):
    """Two fake servers, each in its own thread and event loop like separate processes."""
    engines = [HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=c) for c in (3000, 5000)]
    with serve_in_thread(engines[0]) as first, serve_in_thread(engines[1]) as second:
        yield [first, second]


def test_payload_uses_sglang_field_names():
    payload = sampling_payload([1, 2], SamplingParams(7, temperature=0.6, top_p=0.9, stop_token_ids=(5,), seed=11))
    assert payload == {
        "input_ids": [1, 2],
        "sampling_params": {
            "max_new_tokens": 7,
            "temperature": 0.6,
            "top_p": 0.9,
            "stop_token_ids": [5],
            "skip_special_tokens": False,
            "sampling_seed": 11,
        },
        "return_logprob": True,
    }


def test_parse_a_real_shaped_response():
    body = {
        "text": "hi",
        "output_ids": [10, 151645],
        "meta_info": {
            "id": "abc",
            "finish_reason": {"type": "stop", "matched": 151645},
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "cached_tokens": 0,
            "output_token_logprobs": [[-0.5, 10, None], [-0.01, 151645, None]],
        },
    }
    r = parse_generation(body)
    assert (r.output_ids, r.logprobs, r.finish_reason) == ([10, 151645], [-0.5, -0.01], "stop")
    with pytest.raises(RuntimeError, match="abort"):
        parse_generation({"output_ids": [], "meta_info": {"finish_reason": {"type": "abort", "message": "x"}}})


async def test_client_matches_the_hf_engine_through_http(servers, small_fmt, tiny_assets):
    (url, app), _ = servers
    engine = SGLangEngine(url)
    assert isinstance(engine, Engine) and engine.kv_capacity_tokens() == 3000
    prompts = [small_fmt.encode("What is 2 + 2?"), small_fmt.encode("hello")]
    params = [SamplingParams(12, temperature=1.0, seed=5), SamplingParams(12, temperature=0.0)]
    try:
        results = await asyncio.gather(*(engine.generate(p, s) for p, s in zip(prompts, params, strict=True)))
    finally:
        await engine.aclose()
    direct = decode_batch(
        HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=1)._model, prompts, params, 4070
    )
    assert [r.output_ids for r in results] == [d.output_ids for d in direct]
    for r, d in zip(results, direct, strict=True):
        assert r.logprobs == pytest.approx(d.logprobs, abs=1e-5)
    assert app[COUNTS]["generate"] >= 2


async def test_stop_token_reaches_the_client(servers, small_fmt):
    (url, _), _ = servers
    engine = SGLangEngine(url)
    probe = await engine.generate(small_fmt.encode("x"), SamplingParams(6, temperature=0.0))
    stop = probe.output_ids[2]
    r = await engine.generate(small_fmt.encode("x"), SamplingParams(6, temperature=0.0, stop_token_ids=(stop,)))
    await engine.aclose()
    assert r.finish_reason == "stop" and r.output_ids[-1] == stop and len(r.output_ids) == len(r.logprobs)


async def test_weights_and_cache_endpoints(servers, tiny_assets):
    (url, app), _ = servers
    engine = SGLangEngine(url)
    await engine.update_weights(tiny_assets.model)
    await engine.flush_cache()
    with pytest.raises(RuntimeError, match="refused"):
        await engine.update_weights("/no/such/checkpoint")
    await engine.aclose()
    assert app[COUNTS]["update_weights"] == 1 and app[COUNTS]["flush_cache"] == 1


def test_build_engines_one_per_server(servers):
    urls = [url for url, _ in servers]
    engines = build_engines(RolloutConfig(engine="sglang", sglang_urls=urls), "unused-model-path")
    assert [e.kv_capacity_tokens() for e in engines] == [3000, 5000]
    override = build_engines(RolloutConfig(engine="sglang", sglang_urls=urls[:1], sglang_kv_capacity_tokens=77), "")
    assert override[0].kv_capacity_tokens() == 77
    with pytest.raises(ValueError, match="sglang_urls is empty"):
        build_engines(RolloutConfig(engine="sglang"), "")


def test_server_info_answers_like_sglang(servers):
    (url, _), _ = servers
    info = httpx.get(f"{url}/server_info").json()
    assert info["max_total_num_tokens"] == 3000
    assert httpx.get(f"{url}/health").status_code == 200
