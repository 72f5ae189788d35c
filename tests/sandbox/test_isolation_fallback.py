"""Without namespaces or a uid to drop to (where the kernel or the account refuses them, or
switched off as here) the service still answers, reports what it lacks, cleans up, and
survives a program that kills its zygote; the README states what is then exposed."""

from __future__ import annotations

import os
import time

from configs.sandbox import SandboxConfig
from sandbox.types import ToolCall

FALLBACK = SandboxConfig(isolate_network=False, private_tmp=False, hidden_paths=[], drop_privileges=False,
                         exec_workers=2, verify_workers=1, timeout_s=5)


async def test_service_without_namespaces_or_uid_drop(start_extra_server):
    srv = start_extra_server(FALLBACK)
    h = srv.health()
    assert not h["isolation"]["network_namespace"] and not h["isolation"]["private_tmp"]
    assert not h["isolation"]["uid_drop"] and h["uid_range"] is None
    port = srv.url.rsplit(":", 1)[1]
    async with srv.client() as sb:
        r = await sb.run(ToolCall(f"import socket, os\nsocket.create_connection(('127.0.0.1', {port})).close()\n"
                                  "open('x', 'w').write('1')\nprint('reached', os.getcwd())"))
        assert r.status == "ok" and r.feedback.startswith("reached /")  # loopback is reachable here
        cwd = r.feedback.split()[-1]
        r = await sb.run(ToolCall("import subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True)"))
        assert r.status == "ok"
        for _ in range(4):  # every slot recycled at least once
            assert (await sb.run(ToolCall("import os\nprint(os.listdir('.'))"))).feedback == "[]"
        assert not os.path.exists(os.path.join(cwd, "x"))
        _wait_for_no_orphans(h["zygote_pid"])

        # No IPC namespace of its own here, so the seccomp filter refuses System V IPC and
        # POSIX message queues instead (they would outlive the call, machine-wide).
        assert h["isolation"]["seccomp"] and not h["isolation"]["call_namespaces"]
        r = await sb.run(ToolCall("import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                  "print(libc.shmget(0, 4096, 0o1600), libc.mq_open(b'/q', 0o100 | 2, 0o600, None), "
                                  "errno.errorcode[ctypes.get_errno()])"))
        assert (r.status, r.feedback) == ("ok", "-1 -1 EPERM")

        # Nothing stops a program from killing its zygote here: a new one takes over.
        r = await sb.run(ToolCall("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))
        assert r.status in ("ok", "error")  # it may report before its own death signal lands
        after = await sb.run(ToolCall("print(6 * 7)"))
        assert (after.status, after.feedback) == ("ok", "42")
        h2 = srv.health()
        # When the zygote's loss is seen before the call's own result, the service cannot tell
        # the program's doing from an outside death and retries the call once (a second kill,
        # a second restart): bounded, and timing-dependent under load (CI saw it).
        restarts, retried = h2["counters"]["zygote_restarts"], h2["counters"].get("calls_retried", 0)
        assert restarts in (1, 2) and retried == restarts - 1 and h2["zygote_pid"] != h["zygote_pid"]


def _wait_for_no_orphans(zygote_pid: int) -> None:
    """The zygote is the subreaper of every call: anything re-parented to it that is not a
    fresh child of its own (same command line) is a leftover."""
    deadline = time.monotonic() + 5
    while strays := [p for p in _children_of(zygote_pid) if b"sandbox.zygote" not in _cmdline(p)]:
        assert time.monotonic() < deadline, strays
        time.sleep(0.05)


def _children_of(ppid: int) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                    out.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read() or b"sandbox.zygote (exiting)"
    except OSError:
        return b"sandbox.zygote (gone)"
