"""The SGLang client against the fake server (SGLang's native HTTP API backed by the hf engine)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from configs.rollout import RolloutConfig
from rollout.engines.base import Engine, SamplingParams, build_engines
from rollout.engines.fake_sglang import COUNTS, KILL, serve_in_thread
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


@pytest.fixture(scope="module")
def eos_server(tiny_assets, small_fmt, tmp_path_factory):
    """A fake server whose model's generation config names an extra end-of-text id X (Qwen3-Base style)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_assets.model).eval()
    prompt = small_fmt.encode("x")
    (greedy,) = decode_batch(model, [prompt], [SamplingParams(8, temperature=0.0)], 4070)
    eos = greedy.output_ids[3]
    model.generation_config.eos_token_id = [model.config.eos_token_id, eos]
    path = tmp_path_factory.mktemp("eos-model")
    model.save_pretrained(path)
    engine = HFEngine.from_pretrained(str(path), kv_capacity_tokens=3000)
    with serve_in_thread(engine) as (url, _):
        yield url, prompt, eos, greedy.output_ids[: greedy.output_ids.index(eos) + 1]


async def test_fake_server_stops_where_sglang_does(eos_server):
    url, prompt, eos, expected = eos_server
    engine = SGLangEngine(url)
    greedy = SamplingParams(8, temperature=0.0)
    try:
        stopped = await engine.generate(prompt, greedy)  # no stop ids asked: the model's eos still ends it
        ignored = await engine.generate(prompt, SamplingParams(8, temperature=0.0, ignore_eos=True))
        last = await engine.generate(prompt, SamplingParams(len(expected), temperature=0.0))
    finally:
        await engine.aclose()
    assert (stopped.output_ids, stopped.finish_reason, stopped.stop_token_id) == (expected, "stop", eos)
    assert len(ignored.output_ids) == 8 and ignored.finish_reason == "length"
    # SGLang checks the length limit first: eos as the last allowed token reports "length".
    assert (last.output_ids, last.finish_reason, last.stop_token_id) == (expected, "length", None)


async def _rollout_on(urls, small_fmt, sandbox, problems: int = 6, **cfg):
    from configs.rollout import SamplingSettings
    from rollout.groups import Problem
    from rollout.runtime import RolloutRuntime

    config = RolloutConfig(engine="sglang", sglang_urls=urls, engine_retry_backoff_s=0.0, **cfg)
    engines = build_engines(config, "")
    try:
        runtime = RolloutRuntime(config, small_fmt, engines, sandbox)
        settings = SamplingSettings(temperature=1.0, max_response_tokens=24, max_turns=2, seed=5)
        return await runtime.sample_and_score([Problem(f"p{i}", "0") for i in range(problems)], 2, settings)
    finally:
        for e in engines:
            await e.aclose()


async def test_rollout_through_servers_failing_one_request_in_ten(tiny_assets, small_fmt, scripted):
    engines = [HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=3000) for _ in range(2)]
    with (
        serve_in_thread(engines[0], fail_every=10) as (a, app_a),
        serve_in_thread(engines[1], fail_every=10) as (b, app_b),
    ):
        groups = await _rollout_on([a, b], small_fmt, scripted.sandbox(), problems=20, engine_max_attempts=5)
    assert app_a[COUNTS]["failed"] + app_b[COUNTS]["failed"] >= 3
    assert groups.failed == 0 and groups.engine_retries == app_a[COUNTS]["failed"] + app_b[COUNTS]["failed"]
    assert all(0 < t.response_tokens <= 24 for g in groups for t in g)


async def test_a_server_that_dies_mid_rollout(tiny_assets, small_fmt, scripted):
    engines = [HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=3000) for _ in range(2)]
    with serve_in_thread(engines[0]) as (a, app_a), serve_in_thread(engines[1]) as (b, _):

        async def kill_when_busy():
            while app_a[COUNTS]["generate"] < 2:
                await asyncio.sleep(0.005)
            await asyncio.to_thread(app_a[KILL])

        killer = asyncio.create_task(kill_when_busy())
        groups = await _rollout_on([a, b], small_fmt, scripted.sandbox())
        await killer
    assert groups.failed == 0 and groups.engine_retries >= 1
    assert all(t.finish_reason in ("stop", "eos", "turns", "length") for g in groups for t in g)
    # With nothing left to fail over to, the trajectories are recorded as failed and the call returns.
    engine = HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=3000)
    with serve_in_thread(engine) as (url, app):
        app[KILL]()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health")
        dead = await _rollout_on(
            [url], small_fmt, scripted.sandbox(), sglang_kv_capacity_tokens=3000, engine_max_attempts=2
        )
    assert dead.failed == 12 and "ConnectError" in next(iter(dead.failures))


async def test_cancelling_a_rollout_reaches_the_server_side_request(tiny_assets, small_fmt):
    engine = HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=100_000)
    with serve_in_thread(engine) as (url, _):
        client = SGLangEngine(url)
        params = SamplingParams(20_000, temperature=1.0, seed=3, ignore_eos=True)
        task = asyncio.create_task(client.generate(small_fmt.encode("long"), params))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if engine.inflight:
                break
        assert engine.inflight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not engine.inflight:
                break
        await client.aclose()
        assert engine.inflight == 0  # the server dropped the row: the hung-up request is no longer decoded


async def test_a_runtime_makes_every_server_serve_its_stage_model(tiny_assets, tmp_path):
    """SGLang servers outlive a stage: they hold the model they were started with, or the
    weights an earlier stage pushed. `build_runtime` for a checkpoint pushes that checkpoint to
    every server before the first request (found by the rehearsal of the paper's path: stage 1
    rolled out with whatever the servers had loaded, not the SFT checkpoint), and pushes nothing
    to a server that already serves it."""
    import shutil

    from configs.sandbox import SandboxConfig
    from rollout.runtime import build_runtime

    checkpoint = tmp_path / "sft_model"
    shutil.copytree(tiny_assets.model, checkpoint)
    engines = [HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=3000) for _ in range(2)]
    with serve_in_thread(engines[0], model_path=tiny_assets.model) as (a, app_a), \
            serve_in_thread(engines[1], model_path=str(checkpoint)) as (b, app_b):
        cfg = RolloutConfig(engine="sglang", sglang_urls=[a, b])
        async with build_runtime(cfg, SandboxConfig(), str(checkpoint), tiny_assets.tokenizer):
            info = [httpx.get(f"{u}/get_model_info").json()["model_path"] for u in (a, b)]
        assert info == [str(checkpoint)] * 2
        assert (app_a[COUNTS]["update_weights"], app_b[COUNTS]["update_weights"]) == (1, 0)
        assert app_a[COUNTS]["flush_cache"] == 1


async def test_weights_from_disk_land_between_requests_with_their_version(tiny_assets, small_fmt, tmp_path):
    """SGLang's RL path: `/update_weights_from_disk` with a `weight_version` while requests run.
    None is dropped; each is one model's greedy output; `meta_info.weight_version` says whose."""
    import torch
    from transformers import AutoModelForCausalLM

    changed = AutoModelForCausalLM.from_pretrained(tiny_assets.model)
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(1)) * 0.5)
    changed.save_pretrained(tmp_path / "new")
    prompt, params = small_fmt.encode("What is 2 + 2?"), SamplingParams(20, temperature=0.0, ignore_eos=True)
    expected = {v: decode_batch(AutoModelForCausalLM.from_pretrained(m).eval(), [prompt], [params], 0)[0].output_ids
                for v, m in ((None, tiny_assets.model), (3, str(tmp_path / "new")))}
    assert expected[None] != expected[3]
    backend = HFEngine.from_pretrained(tiny_assets.model, kv_capacity_tokens=10_000)
    with serve_in_thread(backend) as (url, app):
        client = SGLangEngine(url)

        try:  # requests keep coming while the server loads the new model from disk, and after
            update = asyncio.create_task(client.update_weights(str(tmp_path / "new"), version=3))
            requests, sent_after = [], None
            while sent_after is None or len(requests) < sent_after + 4:
                if sent_after is None and update.done():
                    sent_after = len(requests)  # requests from here on were sent once it had returned
                requests.append(asyncio.create_task(client.generate(prompt, params)))
                await asyncio.sleep(0.005)
            await update
            results = await asyncio.gather(*requests)
        finally:
            await client.aclose()
    assert [r.weight_version for r in results[sent_after:]] == [3] * (len(results) - sent_after)
    assert {r.weight_version for r in results} == {None, 3} and client.weight_version == 3
    for r in results:  # before the client's first tagged push a result has no version it can trust
        assert r.output_ids == expected[r.weight_version]
    assert app[COUNTS]["update_weights"] == 1 and app[COUNTS]["failed"] == 0
