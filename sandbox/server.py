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


async def _run_one(executor: Executor, call: object) -> SandboxResult:
    if not isinstance(call, dict) or not isinstance(call.get("code"), str):
        return _invalid('"code" must be a string.')
    stdin = call.get("input") or ""
    if not isinstance(stdin, str):
        return _invalid('"input" must be a string.')
    return await executor.run(call["code"], stdin)


async def _json_body(request: web.Request) -> object:
    try:
        return await request.json()
    except ValueError as exc:
        raise web.HTTPBadRequest(text=f"body is not JSON: {exc}") from exc


async def handle_run(request: web.Request) -> web.Response:
    body = await _json_body(request)
    calls = body.get("calls") if isinstance(body, dict) else None
    if not isinstance(calls, list):
        raise web.HTTPBadRequest(text='expected {"calls": [...]}')
    request.app[EXECUTOR].counters["http_run_requests"] += 1
    results = await asyncio.gather(*(_run_one(request.app[EXECUTOR], c) for c in calls))
    return web.json_response({"results": [dataclasses.asdict(r) for r in results]})


async def handle_verify(request: web.Request) -> web.Response:
    body = await _json_body(request)
    pairs = body.get("pairs") if isinstance(body, dict) else None
    if not isinstance(pairs, list) or not all(isinstance(p, dict) for p in pairs):
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
    web.run_app(build_app(cfg), host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
