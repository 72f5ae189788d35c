"""No call or client can break the service (issue 22, point 5): forged result records, pid
reuse, one client's batch against another's call, and preloads that fail."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from configs.sandbox import SandboxConfig
from sandbox.zygote import Zygote
from sandbox.zygote_link import ZygoteLink

TWO_SLOTS = SandboxConfig(timeout_s=10, exec_workers=2, verify_workers=1)
STATUSES = {"ok", "error", "timeout", "resource_limit", "invalid_call"}

# Programs that write their own "result record" onto the record's fd (3) and leave at once:
# every value a child can send is a claim the server must check.
_FORGE = """
import json, os, struct
body = {body}
os.write(3, struct.pack(">Q", len(body)) + body)
os._exit(0)
"""
FORGED = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"status": "ok", "exit_code": NaN}',
    b'{"status": "pwned", "exit_code": 0}',
    b'{"status": "ok", "exit_code": true}',
    b'{"status": "ok", "exit_code": ' + b"9" * 4000 + b"}",
    b'{"status": "ok", "exit_code": 1, "note": {"a": 1}}',
    b'{"status": "ok", "exit_code": 1, "note": "\\ud800 lone"}',
    b'{"status": "ok", "exit_code": 0, "repr": {"head": "\\udfff", "tail": "", "total": -5}}',
    b'{"status": "ok", "exit_code": 0, "repr": {"head": "x", "tail": "", "total": 1e308}}',
    b'{"status": "error", "exit_code": 1, "traceback": {"head": "\\ud83d", "tail": "x", "total": 99}}',
    b'{"status": "ok", "exit_code": 0, "usage": {"setup_us": -1, "end_us": ' + b"9" * 4000
    + b', "setup_flt": 0, "end_flt": 0}}',
    b'{"status": "ok", "exit_code": 0, "usage": {"setup_us": 5, "end_us": 1, "setup_flt": 0, "end_flt": 0}}',
    b'{"status": "ok", "exit_code": 0}\xff\xfe',
    b"\xff" * 100,
]


def _no_lone_surrogate(value: object) -> bool:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def test_a_forged_result_record_cannot_break_the_service(server):
    before = server.health()["counters"]
    async with server.client() as sb:
        results = await sb.run_batch([_program(_FORGE.format(body=repr(b))) for b in FORGED])
    for body, r in zip(FORGED, results, strict=True):
        assert r.status in STATUSES, (body[:40], r)
        assert _no_lone_surrogate([r.feedback, r.extra]), (body[:40], r.feedback)
    health = server.health()  # still answers, and as JSON any client reads
    json.dumps(health, allow_nan=False)
    counters = health["counters"]
    assert all(type(v) is int and 0 <= v < 2**53 for v in counters.values()), counters
    assert set(k for k in counters if k.startswith("status_")) <= {f"status_{s}" for s in STATUSES}
    assert counters.get("child_run_cpu_us", 0) - before.get("child_run_cpu_us", 0) < 60 * 10**6
    async with server.client() as sb:
        assert (await sb.run(_program("print(6 * 7)"))).feedback == "42"


async def test_a_real_lone_surrogate_in_a_traceback_is_replaced(server):
    async with server.client() as sb:
        r = await sb.run(_program("raise ValueError('bad \\ud800 here')"))
        value = await sb.run(_program("import sys; sys.exit('\\udc80')"))
    assert "ValueError: bad \ufffd here" in r.feedback
    assert value.status == "error" and value.feedback == "\ufffd"


def _program(code: str):  # noqa: ANN202
    from sandbox.tool_call import ToolCall

    return ToolCall(code=code)


async def test_an_exit_status_belongs_to_its_fork_not_to_its_pid():
    """The kernel reuses pids: an old fork's exit, reported late, must not answer a new fork."""
    link = ZygoteLink({}, on_child=children.append if (children := []) is not None else None, on_lost=lambda: None)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link._sock, link._ready = ours, asyncio.get_running_loop().create_future()
    link._ready.set_result({})
    ours.setblocking(False)
    theirs.send(json.dumps({"op": "exit", "pid": 4242, "serial": 1, "status": 9}).encode())
    a, b = socket.socketpair()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    socket.send_fds(theirs, [json.dumps({"op": "child", "slot": 0, "pid": 4242, "serial": 2}).encode()],
                    [a.fileno(), r1, r2])
    await asyncio.sleep(0)
    link._on_readable()
    (child,) = children
    assert (child.pid, child.serial) == (4242, 2)
    assert await link.exit_status(child, 0.2) is None  # fork 1's status is not fork 2's
    theirs.send(json.dumps({"op": "exit", "pid": 4242, "serial": 2, "status": 0}).encode())
    link._on_readable()
    assert await link.exit_status(child, 0.2) == 0
    link.kill(child)
    assert json.loads(theirs.recv(4096)) == {"op": "kill", "pid": 4242, "serial": 2}
    child.close()
    for fd in (w1, w2):
        os.close(fd)
    for s in (a, b, ours, theirs):
        s.close()


def test_the_zygote_kills_only_the_fork_a_pid_still_names():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    zygote = Zygote.__new__(Zygote)
    zygote.children = {proc.pid: 7}
    zygote.kill(proc.pid, 6)  # a request for an earlier fork that had this pid
    time.sleep(0.2)
    assert proc.poll() is None
    zygote.kill(proc.pid, 7)
    assert proc.wait(5) == -9


async def test_one_requests_batch_does_not_starve_another_requests_call(start_extra_server):
    srv = start_extra_server(TWO_SLOTS)
    big = json.dumps({"calls": [{"code": "import time; time.sleep(0.25)"}] * 40}).encode()
    async with aiohttp.ClientSession() as s:
        batch = asyncio.ensure_future(s.post(f"{srv.url}/run", data=big))
        await asyncio.sleep(0.6)
        started = time.monotonic()
        async with s.post(f"{srv.url}/run", json={"calls": [{"code": "print(1)"}]}) as r:
            assert (await r.json())["results"][0]["feedback"] == "1"
        waited = time.monotonic() - started
        resp = await batch
        assert len((await resp.json())["results"]) == 40
    # In arrival order it would wait for the ~36 calls queued ahead of it: 36 x 0.25 s / 2 slots.
    assert waited < 1.5, f"a lone call waited {waited:.1f} s behind another request's batch"


async def test_a_failed_preload_makes_the_service_degraded(start_extra_server):
    cfg = TWO_SLOTS.model_copy(update={"preload_modules": ["json", "no_such_module_for_this_test"]})
    srv = start_extra_server(cfg)
    health = srv.health()
    assert health["status"] == "degraded"
    assert "no_such_module_for_this_test" in health["isolation"]["preload_failed"]


@pytest.mark.skipif(os.geteuid() != 0, reason="hiding paths needs the mount namespace of a root service")
async def test_the_preload_works_from_a_virtualenv_reached_through_a_symlink(start_extra_server, tmp_path):
    """A checkout whose .venv is a link to a folder elsewhere, the checkout hidden from calls."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(Path(sys.prefix).resolve())
    python = str(checkout / ".venv" / "bin" / "python")
    cfg = TWO_SLOTS.model_copy(update={"hidden_paths": ["/root", "/home", str(checkout)]})
    srv = start_extra_server(cfg, python)
    health = srv.health()
    assert health["status"] == "ok" and not health["isolation"]["preload_failed"], health
    async with srv.client() as sb:
        r = await sb.run(_program("import numpy, sympy, sys; print(numpy.arange(3).sum(), sys.prefix)"))
    assert r.feedback.startswith("3 ") and "checkout" in r.feedback, r.feedback
