"""A slot takes its next call only when everything of the previous call is gone (issue 22,
point 3). For each counter the kernel keeps per uid, a call that measures it gets the same
figure in a slot that just ran a call filling it as in a rested slot.

Counters and how each stays quiet:
- processes (RLIMIT_NPROC), pending signals (RLIMIT_SIGPENDING), inotify instances, pipe pages
  (fs.pipe-user-pages-soft), and what else lives and dies with fds (epoll and inotify watches,
  whose per-uid limits - millions here - no call can reach): released when the processes
  holding them are reaped; the slot's next child waits until no process of its uid is left;
- POSIX message-queue bytes (RLIMIT_MSGQUEUE) and SHM_LOCKed segments (RLIMIT_MEMLOCK):
  released only when the call's IPC namespace is freed, which the kernel does later, in a
  work queue: refused by the seccomp filter instead;
- keyrings, user namespaces, fanotify groups: refused by the filter (test_kernel_objects.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from configs.sandbox import SandboxConfig
from sandbox.tool_call import ToolCall

ONE_SLOT = SandboxConfig(timeout_s=10, cpu_time_s=5, exec_workers=1, verify_workers=1, max_processes=16,
                         memory_mb=2048)

FILL = {
    "processes": """
import os, time
for _ in range(14):  # each with 120 MB of its own, so that dying takes the kernel a while
    if os.fork() == 0:
        os.setsid()
        x = bytearray(120 << 20)
        time.sleep(100)
time.sleep(1.5)
print("left 14 processes")
""",
    "pending_signals": """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    n = 0
    try:
        while True:
            os.kill(os.getpid(), signal.SIGRTMIN)
            n += 1
    except OSError:
        pass
    time.sleep(100)
time.sleep(1)
print("left a process holding every pending signal")
""",
    "inotify_instances": """
import ctypes, os, time
libc = ctypes.CDLL(None)
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        while libc.inotify_init1(0) >= 0:
            pass
        time.sleep(100)
time.sleep(1)
print("left 3 processes holding inotify instances")
""",
    "pipe_pages": """
import fcntl, os, time
for _ in range(8):
    if os.fork() == 0:
        os.setsid()
        pipes = []
        try:
            while True:  # 1 MiB pipes until the uid's pipe budget (fs.pipe-user-pages-soft) is spent
                r, w = os.pipe()
                pipes.append((r, w))
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        time.sleep(100)
time.sleep(1)
print("left 8 processes holding the uid's pipe pages")
""",
}
MEASURE = {
    "processes": """
import os, time
kids = []
try:
    while len(kids) < 64:
        pid = os.fork()
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
for k in kids:
    os.kill(k, 9)
print(len(kids))
""",
    "pending_signals": """
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
n = 0
try:
    while n < 200000:
        os.kill(os.getpid(), signal.SIGRTMIN)
        n += 1
except OSError:
    pass
print(n)
""",
    "inotify_instances": """
import ctypes, os, time, json
libc = ctypes.CDLL(None)
r, w = os.pipe()
for _ in range(3):
    if os.fork() == 0:
        n = 0
        while libc.inotify_init1(0) >= 0:
            n += 1
        os.write(w, b"%d," % n)
        os._exit(0)
for _ in range(3):
    os.wait()
print(sum(int(x) for x in os.read(r, 100).decode().strip(",").split(",")))
""",
}
MEASURE["pipe_pages"] = """
import fcntl, os
r, w = os.pipe()
print(fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))  # 65536, or one page once the uid is over its budget
"""
REFUSED = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
mq = libc.mq_open(b"/q", 0o100 | 2, 0o600, None)
mq_err = ctypes.get_errno()
sid = libc.shmget(0, 1 << 20, 0o1600)
lock = libc.shmctl(sid, 11, None)
print(json.dumps([mq, mq_err, lock, ctypes.get_errno()]))
"""


@pytest.fixture(scope="module")
def one_slot(start_extra_server):
    return start_extra_server(ONE_SLOT)


@pytest.mark.parametrize("counter", sorted(FILL))
async def test_a_reused_slot_measures_like_a_rested_one(one_slot, counter):
    async with one_slot.client() as sb:
        await asyncio.sleep(1.0)
        rested = await sb.run(ToolCall(MEASURE[counter]))
        filled = await sb.run(ToolCall(FILL[counter]))
        reused = await sb.run(ToolCall(MEASURE[counter]))
    assert filled.status == "ok", filled.feedback
    assert rested.status == reused.status == "ok", (rested.feedback, reused.feedback)
    assert int(reused.feedback) == int(rested.feedback) > 0, (counter, rested.feedback, reused.feedback)


async def test_counters_released_only_with_the_ipc_namespace_are_refused(one_slot):
    async with one_slot.client() as sb:
        r = await sb.run(ToolCall(REFUSED))
    mq, mq_err, lock, lock_err = json.loads(r.feedback)
    assert (mq, mq_err) == (-1, 1) and (lock, lock_err) == (-1, 1), r.feedback  # EPERM both
