"""HTTP front of the code execution service (SPEC §3): one instance per CPU node.

    python -m sandbox.server --host 127.0.0.1 --port 8711 [--config-json '{"timeout_s": 5}'] [--exit-with-parent]

Endpoints (JSON):
    POST /run     {"calls": [{"code": str, "input": str}, ...]}   -> {"results": [SandboxResult, ...]}
    POST /verify  {"pairs": [{"model_text": str, "reference": str}, ...]} -> {"results": [VerifyResult, ...]}
    GET  /health  workers, queue depths, counters, isolation facts

Binds to loopback by default: the service runs untrusted code and has no authentication,
so exposing it beyond the node is a deliberate choice (`--host 0.0.0.0`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import time

from aiohttp import web

from configs.sandbox import SandboxConfig
from sandbox.executor import Executor
from sandbox.isolation import PR_SET_PDEATHSIG, prctl
from sandbox.types import SandboxResult
from sandbox.verifier_pool import VerifierPool

log = logging.getLogger(__name__)

EXECUTOR = web.AppKey("executor", Executor)
VERIFIERS = web.AppKey("verifiers", VerifierPool)
STARTED = web.AppKey("started", float)
MAX_BODY_BYTES = 256 * 1024 * 1024


def _invalid(reason: str) -> SandboxResult:
    return SandboxResult(status="invalid_call", feedback=f"Invalid tool call: {reason}")


async def _run_one(executor: Executor, call: object, request: object) -> SandboxResult:
    if not isinstance(call, dict) or not isinstance(call.get("code"), str):
        return _invalid('"code" must be a string.')
    stdin = call.get("input") or ""
    if not isinstance(stdin, str):
        return _invalid('"input" must be a string.')
    return await executor.run(call["code"], stdin, request)


_WS = " \t\n\r"
_YIELD_EVERY = 64  # items parsed between two turns of the event loop


def _bad(text: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=text)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


async def _items(request: web.Request, field: str, example: str) -> list:
    """The list under `field` of a `{"<field>": [...]}` body, parsed item by item with the
    event loop served in between: one client's 200 MB batch must not stall the others (a
    whole-body json.loads holds the GIL however it is threaded). Malformed, deeply nested or
    over-long bodies are 400/413, never a 500."""
    expected = f'expected {{"{field}": [{example}]}}'
    try:
        text = (await request.read()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"body is not UTF-8: {exc}") from None
    decoder, cap = json.JSONDecoder(), request.app[EXECUTOR].cfg.max_request_items
    items: list = []
    try:
        i = _skip(text, 0)
        if text[i:i + 1] != "{":
            raise _bad(expected)
        key, i = decoder.raw_decode(text, _skip(text, i + 1))
        i = _skip(text, i)
        if key != field or text[i:i + 1] != ":":
            raise _bad(expected)
        i = _skip(text, i + 1)
        if text[i:i + 1] != "[":
            raise _bad(expected)
        i = _skip(text, i + 1)
        while text[i:i + 1] != "]":
            if items:
                if text[i:i + 1] != ",":
                    raise _bad(f"body is not JSON: ',' or ']' expected at character {i}")
                i = _skip(text, i + 1)
            item, i = decoder.raw_decode(text, i)
            items.append(item)
            if len(items) > cap:
                raise web.HTTPRequestEntityTooLarge(max_size=cap, actual_size=len(items),
                                                    text=f"more than {cap} {field} in one request "
                                                         "(sandbox.max_request_items): split the batch")
            if len(items) % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            i = _skip(text, i)
        i = _skip(text, i + 1)
        if text[i:i + 1] != "}" or _skip(text, i + 1) != len(text):
            raise _bad(expected)
    except RecursionError:
        raise _bad("body is nested deeper than the service parses") from None
    except ValueError as exc:  # JSONDecodeError: a bad item or key
        raise _bad(f"body is not JSON: {str(exc)[:200]}") from None
    return items


async def handle_run(request: web.Request) -> web.Response:
    calls = await _items(request, "calls", "...")
    request.app[EXECUTOR].counters["http_run_requests"] += 1
    # When the client goes away the handler is cancelled (handler_cancellation): its calls still
    # waiting for a slot leave the queue, and running ones are killed like a timed-out call.
    # Calls of this request are served in turn with other requests' (sandbox/fair_queue.py).
    results = await asyncio.gather(*(_run_one(request.app[EXECUTOR], c, id(request)) for c in calls))
    return web.json_response({"results": [dataclasses.asdict(r) for r in results]})


async def handle_verify(request: web.Request) -> web.Response:
    pairs = await _items(request, "pairs", '{"model_text": ..., "reference": ...}')
    if not all(isinstance(p, dict) for p in pairs):
        raise web.HTTPBadRequest(text='expected {"pairs": [{"model_text": ..., "reference": ...}]}')
    pool = request.app[VERIFIERS]
    pool.counters["http_verify_requests"] += 1
    results = await asyncio.gather(
        *(pool.verify(str(p.get("model_text", "")), str(p.get("reference", ""))) for p in pairs)
    )
    return web.json_response({"results": [dataclasses.asdict(r) for r in results]})


async def handle_health(request: web.Request) -> web.Response:
    executor, pool = request.app[EXECUTOR], request.app[VERIFIERS]
    return web.json_response({
        "pid": os.getpid(), "uptime_s": time.monotonic() - request.app[STARTED],
        **executor.health(), **pool.health(),
        "counters": dict(executor.counters + pool.counters),
    })


async def _loop_watchdog(stall_s: float = 30.0) -> None:
    """If the event loop ever stalls this long, dump every thread's stack to the log."""
    while True:
        faulthandler.dump_traceback_later(stall_s, exit=False)
        await asyncio.sleep(1.0)


def build_app(cfg: SandboxConfig) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[EXECUTOR] = Executor(cfg)
    app[VERIFIERS] = VerifierPool(cfg)
    app[STARTED] = time.monotonic()

    async def lifecycle(app: web.Application):
        # Zygote first: both import heavy libraries and the machine may have few cores.
        await app[EXECUTOR].start()
        await app[VERIFIERS].start()
        log.info("sandbox ready: %s", app[EXECUTOR].health())
        watchdog = asyncio.get_running_loop().create_task(_loop_watchdog())
        yield
        watchdog.cancel()
        faulthandler.cancel_dump_traceback_later()
        await app[VERIFIERS].stop()
        await app[EXECUTOR].stop()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_post("/run", handle_run)
    app.router.add_post("/verify", handle_verify)
    app.router.add_get("/health", handle_health)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="Sandboxed Python execution and answer verification.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8711)
    parser.add_argument("--config-json", default="{}", help="SandboxConfig fields as a JSON object")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop (SIGTERM) when the process that started us dies: for local servers")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.exit_with_parent:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    cfg = SandboxConfig.model_validate_json(args.config_json)
    web.run_app(build_app(cfg), host=args.host, port=args.port, print=None, access_log=None,
                handler_cancellation=True, keepalive_timeout=cfg.idle_connection_s)


if __name__ == "__main__":
    main()
