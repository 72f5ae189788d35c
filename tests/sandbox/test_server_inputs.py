"""What a client can send cannot break the service (issue 22, point 5): malformed and deeply
nested bodies get 400, a request carries a bounded number of calls, a client that goes away
takes its queued calls with it, and a large body is parsed off the event loop."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from configs.sandbox import SandboxConfig

TWO_SLOTS = SandboxConfig(timeout_s=10, exec_workers=2, verify_workers=1)


async def _post(url: str, data: bytes) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.post(url, data=data,
                                                    headers={"Content-Type": "application/json"}) as r:
        return r.status, await r.text()


async def test_malformed_or_deep_bodies_are_400_and_the_service_goes_on(server):
    for body in (b"{not json", b"\xff\xfe\x00garbage", b"[" * 200_000 + b"]" * 200_000,
                 b'{"calls": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"calls": "print(1)"}'):
        status, text = await _post(f"{server.url}/run", body)
        assert status == 400, (body[:20], status, text[:200])
    status, text = await _post(f"{server.url}/verify", b'{"pairs": [' + b"[" * 300_000 + b"]" * 300_000 + b"]}")
    assert status == 400 and "nested deeper" in text
    status, text = await _post(f"{server.url}/run", json.dumps({"calls": [{"code": "print(6 * 7)"}]}).encode())
    assert status == 200 and json.loads(text)["results"][0]["feedback"] == "42"
    assert server.health()["pid"]


async def test_a_request_carries_a_bounded_number_of_calls(server):
    cap = server.cfg.max_request_items
    status, text = await _post(f"{server.url}/run", json.dumps({"calls": [{"code": "1"}] * (cap + 1)}).encode())
    assert status == 413 and f"more than {cap} calls" in text


async def test_a_client_that_goes_away_takes_its_queued_calls_with_it(start_extra_server):
    srv = start_extra_server(TWO_SLOTS)
    before = srv.health()["counters"].get("calls", 0)
    body = json.dumps({"calls": [{"code": "import time; time.sleep(0.5)"}] * 40}).encode()
    async with aiohttp.ClientSession() as s:
        try:
            async with s.post(f"{srv.url}/run", data=body, timeout=aiohttp.ClientTimeout(total=1.2)):
                pass
        except TimeoutError:
            pass  # the client gives up and closes its connection
    await asyncio.sleep(4.0)
    ran = srv.health()["counters"].get("calls", 0) - before
    assert ran <= 8, f"{ran} of 40 calls ran although their client left after 1.2 s"  # 2 slots: ~4 then
    started = time.monotonic()
    status, text = await _post(f"{srv.url}/run", json.dumps({"calls": [{"code": "print(1)"}]}).encode())
    assert status == 200 and time.monotonic() - started < 3.0  # not queued behind the abandoned batch


async def test_a_large_body_is_parsed_off_the_event_loop(server):
    """A batch of 10M small values (under the item cap): /health answers while it is parsed
    (a whole-body json.loads held the loop, and the GIL, for the whole parse)."""
    meta = list(range(2_500))  # many small values: what costs a JSON parser time
    big = json.dumps({"pairs": [{"model_text": "x", "reference": str(i), "meta": meta} for i in range(4_000)]})
    async with aiohttp.ClientSession() as s:
        async def health_latency() -> float:
            await asyncio.sleep(0.1)
            t = time.monotonic()
            async with s.get(f"{server.url}/health") as r:
                await r.read()
            return time.monotonic() - t

        post = asyncio.create_task(_post(f"{server.url}/verify", big.encode()))
        latencies = [await health_latency() for _ in range(8)]
        post.cancel()
    assert max(latencies) < 0.5, latencies  # 0.13 s measured here; the whole-body parse: 1.0 s
