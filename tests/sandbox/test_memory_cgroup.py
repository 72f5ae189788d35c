"""All of a call's memory stays within memory_mb (issue 22, point 6): a memory cgroup per slot
counts what RLIMIT_AS cannot see - other processes, System V segments written and detached,
files on the tmpfs scratch. The server here has memory_mb = 512."""

from __future__ import annotations

import pytest

from configs.sandbox import SandboxConfig
from sandbox.tool_call import ToolCall

SHM_THEN_HEAP = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(4):  # 400 MB in segments, written, then unmapped: outside the address space
    sid = libc.shmget(0, 100 << 20, 0o1600)
    p = libc.shmat(sid, None, 0)
    ctypes.memset(p, 1, 100 << 20)
    libc.shmdt(ctypes.c_void_p(p))
x = bytearray(300 << 20)
print("held 700 MB")
"""
PROCESSES = """
import os, time
kids = []
for _ in range(4):  # each within its own address-space limit, 1.2 GB together
    pid = os.fork()
    if pid == 0:
        x = bytearray(300 << 20)
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
print(sorted(os.waitpid(k, 0)[1] for k in kids))
"""
SCRATCH_THEN_HEAP = """
for name in "abcdefgh":  # 200 MB on the tmpfs scratch (scratch_mb is 256), in files under file_size_mb
    with open(name, "wb") as f:
        f.write(b"x" * (25 << 20))
x = bytearray(400 << 20)
print("held 600 MB")
"""


# Touching 700 MB takes the kernel about half a second of CPU; the shared test server allows 1 s.
CFG = SandboxConfig(timeout_s=20, cpu_time_s=10, memory_mb=512, exec_workers=2, verify_workers=1)


@pytest.fixture(scope="module")
def server(start_extra_server):
    srv = start_extra_server(CFG)
    if not srv.health()["isolation"].get("memory_cgroup"):
        pytest.skip("no memory cgroup for calls here (not root, or cgroupfs read-only): /health says so")
    return srv


@pytest.mark.parametrize("code", [SHM_THEN_HEAP, SCRATCH_THEN_HEAP], ids=["shm_detached", "scratch_files"])
async def test_memory_outside_the_address_space_counts(server, code):
    async with server.client() as sb:
        r = await sb.run(ToolCall(code))
        after = await sb.run(ToolCall("print('next')"))
    assert (r.status, r.extra.get("limit")) == ("resource_limit", "memory"), r
    assert r.feedback.endswith("Memory limit: the program needed more than 512 MB."), r.feedback
    assert after.feedback == "next"


async def test_the_processes_of_a_call_share_one_budget(server):
    async with server.client() as sb:
        r = await sb.run(ToolCall(PROCESSES))
    assert r.status == "ok" and "9" in r.feedback, r.feedback  # the kernel killed some of them (SIGKILL)
