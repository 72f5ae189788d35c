"""A stand-in SGLang server for CI: SGLang's native HTTP API, answered by the local hf engine.

It speaks the subset of the API our client uses (`/generate` with input_ids,
`/server_info`, `/get_model_info`, `/update_weights_from_disk`, `/flush_cache`, `/health`) with SGLang's
field names and shapes, so tests/rollout/test_sglang.py exercises the real client code
path end to end on CPU. Stopping follows SGLang's `Req.check_finished`: the length limit
first, then, unless `ignore_eos`, `stop_token_ids`, the model's eos ids (config +
generation_config) and the tokenizer's; `finish_reason` is `{"type": "stop", "matched":
id}` or `{"type": "length", "length": n}`. Weights load between requests (SGLang's
`model_update_lock`: an update waits for the running requests, later ones wait for it), and
`meta_info.weight_version` is the tag the last `/update_weights_from_disk` gave. Faults for
tests: `fail_every` (HTTP 500 on every n-th request) and `app[KILL]` (the server dies). It is
not SGLang: no radix cache, no paging, no continuous batching; real SGLang runs only on GPU
machines (rollout/README.md).

    python -m rollout.engines.fake_sglang --model-path DIR --port 30000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from rollout.engines.base import SamplingParams
from rollout.engines.hf import HFEngine

log = logging.getLogger(__name__)

ENGINE = web.AppKey("engine", HFEngine)
COUNTS = web.AppKey("counts", dict)
FAULTS = web.AppKey("faults", dict)  # fail_every: answer every n-th /generate with HTTP 500 (0: never)
KILL = web.AppKey("kill", object)  # serve_in_thread: a callable that stops the server as if it died
TOKENIZER_EOS = web.AppKey("tokenizer_eos", object)  # the tokenizer's eos id, or None
LOADED = web.AppKey("loaded", dict)  # {"model_path": ...}: what /get_model_info reports, the weights loaded last


async def _generate(request: web.Request) -> web.Response:
    body = await request.json()
    ids = body.get("input_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        return web.json_response({"error": "input_ids must be one non-empty list of ints"}, status=400)
    counts, faults = request.app[COUNTS], request.app[FAULTS]
    counts["generate"] += 1
    if faults["fail_every"] and counts["generate"] % faults["fail_every"] == 0:
        counts["failed"] += 1
        return web.json_response({"error": "injected fault"}, status=500)
    sp = body.get("sampling_params") or {}
    max_new = int(sp.get("max_new_tokens", 128))
    ignore_eos = bool(sp.get("ignore_eos", False))
    # SGLang's Req.check_finished: unless ignore_eos, stop_token_ids, the model's eos ids
    # (config + generation_config; the hf engine adds those itself) and the tokenizer's eos.
    # With ignore_eos it tests none of them, stop_token_ids included.
    stops = set() if ignore_eos else set(sp.get("stop_token_ids") or ())
    if not ignore_eos and request.app[TOKENIZER_EOS] is not None:
        stops.add(request.app[TOKENIZER_EOS])
    params = SamplingParams(
        max_new_tokens=max_new,
        temperature=float(sp.get("temperature", 1.0)),
        top_p=float(sp.get("top_p", 1.0)),
        stop_token_ids=tuple(sorted(stops)),
        seed=sp.get("sampling_seed"),
        ignore_eos=ignore_eos,
    )
    result = await request.app[ENGINE].generate(ids, params)
    # SGLang tests the length limit before stop tokens: a stop token emitted as the last
    # allowed token is reported as "length".
    if len(result.output_ids) >= max_new:
        finish = {"type": "length", "length": max_new}
    elif result.finish_reason == "stop":
        finish = {"type": "stop", "matched": result.output_ids[-1]}
    else:
        finish = {"type": "length", "length": len(result.output_ids)}
    meta = {
        "prompt_tokens": len(ids),
        "completion_tokens": len(result.output_ids),
        "finish_reason": finish,
        "weight_version": str(result.weight_version),  # SGLang 0.5: the tag of the last weight update
    }
    if body.get("return_logprob"):
        meta["output_token_logprobs"] = [
            [lp, t, None] for lp, t in zip(result.logprobs, result.output_ids, strict=True)
        ]
    return web.json_response({"text": "", "output_ids": result.output_ids, "meta_info": meta})


async def _server_info(request: web.Request) -> web.Response:
    capacity = request.app[ENGINE].kv_capacity_tokens()
    return web.json_response(
        {
            "version": "fake-sglang",
            "max_total_num_tokens": capacity,
            "internal_states": [{"max_total_num_tokens": capacity}],
        }
    )


async def _update_weights(request: web.Request) -> web.Response:
    body = await request.json()
    tag = body.get("weight_version")
    try:  # the engine loads between requests, as SGLang's writer lock does: running ones finish first
        await request.app[ENGINE].update_weights(body["model_path"], int(tag) if str(tag).isdigit() else None)
    except Exception as exc:  # SGLang answers failures in the body, not with a status
        return web.json_response({"success": False, "message": f"{type(exc).__name__}: {exc}"})
    request.app[COUNTS]["update_weights"] += 1
    request.app[LOADED]["model_path"] = body["model_path"]
    return web.json_response({"success": True, "message": "Succeeded to update model weights."})


async def _model_info(request: web.Request) -> web.Response:
    # SGLang reports the path its weights were loaded from, updated by update_weights_from_disk.
    path = request.app[LOADED]["model_path"]
    return web.json_response({"model_path": path, "tokenizer_path": path, "is_generation": True})


async def _flush_cache(request: web.Request) -> web.Response:
    request.app[COUNTS]["flush_cache"] += 1
    return web.Response(text="Cache flushed.\n")


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="")


def make_app(engine: HFEngine, *, tokenizer_eos_id: int | None = None, fail_every: int = 0,
             model_path: str = "") -> web.Application:
    app = web.Application(client_max_size=64 * 1024**2)
    app[ENGINE] = engine
    app[COUNTS] = {"generate": 0, "failed": 0, "update_weights": 0, "flush_cache": 0}
    app[FAULTS] = {"fail_every": fail_every}
    app[TOKENIZER_EOS] = tokenizer_eos_id
    app[LOADED] = {"model_path": model_path}
    app.router.add_post("/generate", _generate)
    app.router.add_get("/server_info", _server_info)
    app.router.add_get("/get_server_info", _server_info)  # the older name
    app.router.add_post("/update_weights_from_disk", _update_weights)
    app.router.add_get("/get_model_info", _model_info)
    app.router.add_route("*", "/flush_cache", _flush_cache)
    app.router.add_get("/health", _health)
    return app


@contextmanager
def serve_in_thread(
    engine: HFEngine, host: str = "127.0.0.1", port: int = 0, **app_kwargs
) -> Iterator[tuple[str, web.Application]]:
    """Run the fake server on its own event loop in a thread, like a separate server; yields (url, app).

    `app[KILL]()` stops it abruptly (open connections dropped, new ones refused), as if it died.
    """
    loop = asyncio.new_event_loop()
    app = make_app(engine, **app_kwargs)
    # A client that hangs up cancels its handler (and so its hf request), as SGLang aborts
    # the request of a closed connection.
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
    killed = threading.Event()

    def kill() -> None:
        if not killed.is_set():
            killed.set()
            asyncio.run_coroutine_threadsafe(_die(runner), loop).result(30)

    app[KILL] = kill
    ready = threading.Event()
    url: list[str] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, host, port)
        loop.run_until_complete(site.start())
        url.append(f"http://{host}:{site._server.sockets[0].getsockname()[1]}")  # port 0: the one bound
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, name="fake-sglang", daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("fake SGLang server did not start")
    try:
        yield url[0], app
    finally:
        asyncio.run_coroutine_threadsafe(_shutdown(runner, engine, killed.is_set()), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


async def _die(runner: web.AppRunner) -> None:
    """Drop every open connection mid-request (clients see a reset), then stop listening."""
    for handler in list(runner.server.connections if runner.server else []):
        if handler.transport is not None:
            handler.transport.abort()
    await runner.cleanup()


async def _shutdown(runner: web.AppRunner, engine: HFEngine, killed: bool) -> None:
    await engine.aclose()
    if not killed:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--kv-capacity-tokens", type=int, default=65536)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--tokenizer-path", help="its eos id stops generation too, as in SGLang")
    parser.add_argument("--fail-every", type=int, default=0, help="answer every n-th /generate with HTTP 500")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    engine = HFEngine.from_pretrained(
        args.model_path, kv_capacity_tokens=args.kv_capacity_tokens, max_batch_size=args.max_batch_size
    )
    eos = None
    if args.tokenizer_path:
        from transformers import AutoTokenizer

        eos = AutoTokenizer.from_pretrained(args.tokenizer_path).eos_token_id
    app = make_app(engine, tokenizer_eos_id=eos, fail_every=args.fail_every, model_path=args.model_path)
    web.run_app(app, host=args.host, port=args.port, handler_cancellation=True)


if __name__ == "__main__":
    main()
