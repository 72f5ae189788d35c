"""Issue 9 point 7: no kernel object a call creates outlives it or is seen by a later call.

System V IPC and POSIX message queues live in the call's own IPC namespace; facilities
shared per user or per machine that no namespace of ours covers are refused by the
seccomp filter (sandbox/seccomp.py). Each is exercised from inside a real call."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest

from sandbox import seccomp
from sandbox.types import ToolCall

PRELUDE = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
def sys_(nr, *args):
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) else a if isinstance(a, ctypes.Array) else ctypes.c_long(a)
            for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == 0 and os.getpid() != ME:  # a clone that should have been refused: leave quietly
        os._exit(0)
    return errno.errorcode.get(ctypes.get_errno(), '?') if r == -1 else 'ok'
ME = os.getpid()
"""


def _nr(name: str) -> int:
    col = seccomp.ARCHES[platform.machine()][0]
    return {**seccomp.DENIED, **seccomp.IPC, **seccomp.SPECIAL}[name][col]


async def _json_run(sb, code: str) -> dict:
    r = await sb.run(ToolCall(PRELUDE + code))
    assert r.status == "ok", r.feedback
    return json.loads(r.feedback.splitlines()[-1])


@pytest.mark.skipif(platform.machine() not in seccomp.ARCHES, reason="no syscall table for this architecture")
async def test_per_user_and_per_machine_facilities_are_refused(sb, server):
    assert server.health()["isolation"]["seccomp"] is True
    code = f"""
attr = (ctypes.c_char * 128)()
attr[4] = 128  # size
attr[0] = 1  # PERF_TYPE_SOFTWARE
attr[8] = 1  # PERF_COUNT_SW_TASK_CLOCK
attr[40] = 0x60  # exclude_kernel | exclude_hv: allowed unprivileged at paranoid 2
params = (ctypes.c_char * 120)()
iov = (ctypes.c_char * 16)()
out = dict(
    add_key=sys_({_nr('add_key')}, b'user', b'k', b'secret', 6, -4),
    keyctl=sys_({_nr('keyctl')}, 0, -4, 0),
    request_key=sys_({_nr('request_key')}, b'user', b'k', 0, 0),
    unshare_user=sys_({_nr('unshare')}, 0x10000000),
    unshare_ipc=sys_({_nr('unshare')}, 0x08000000),
    setns=sys_({_nr('setns')}, 0, 0),
    clone_newuser=sys_({_nr('clone')}, 0x10000000 | 17, 0, 0, 0, 0),
    clone3=sys_({_nr('clone3')}, 0, 0),
    userfaultfd=sys_({_nr('userfaultfd')}, 1),
    perf_event_open=sys_({_nr('perf_event_open')}, attr, 0, -1, -1, 0),
    bpf=sys_({_nr('bpf')}, 0, 0, 0),
    io_uring_setup=sys_({_nr('io_uring_setup')}, 4, params),
    ptrace=sys_({_nr('ptrace')}, 0, 0, 0, 0),
    process_vm_readv=sys_({_nr('process_vm_readv')}, os.getpid(), iov, 0, iov, 0, 0),
    mount=sys_({_nr('mount')}, b'none', b'/tmp', b'tmpfs', 0, 0),
    chroot=sys_({_nr('chroot')}, b'/'),
    personality=sys_({_nr('personality')}, 0x0400000),
    open_by_handle_at=sys_({_nr('open_by_handle_at')}, -100, iov, 0),
)
print(json.dumps(out))
"""
    got = await _json_run(sb, code)
    expected = {name: "EPERM" for name in got} | {"clone3": "ENOSYS"}
    assert got == expected
    # What ordinary programs need still works under the filter.
    r = await sb.run(ToolCall("import os, subprocess, sys, threading\nt = threading.Thread(target=print, args=('t',))\n"
                              "t.start(); t.join()\nsub = [sys.executable, '-c', 'print(6 * 7)']\n"
                              "print(subprocess.run(sub, capture_output=True)"
                              ".stdout.decode().strip(), os.waitpid(os.fork() or os._exit(3), 0)[1] >> 8)"))
    assert (r.status, r.feedback) == ("ok", "t\n42 3")


async def test_sysv_shared_memory_is_private_to_the_call(sb, server):
    create = """
import ctypes
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0x5A17, 4096, 0o1666)  # IPC_CREAT | 0666
ctypes.memmove(libc.shmat(shmid, None, 0), b'left for the next call', 22)
big = libc.shmget(0, (server_mb + 64) << 20, 0o1600)  # more than the call may use
print(json.dumps(dict(shmid=shmid, big=big, big_errno=errno.errorcode.get(ctypes.get_errno()))))
"""
    made = await _json_run(sb, create.replace("server_mb", str(server.cfg.memory_mb)))
    assert made["shmid"] >= 0
    assert made["big"] == -1 and made["big_errno"] in ("EINVAL", "ENOSPC", "ENOMEM"), made
    look = """
libc.shmget.restype = ctypes.c_int
shmid = libc.shmget(0x5A17, 0, 0)
print(json.dumps(dict(shmid=shmid, err=errno.errorcode.get(ctypes.get_errno()),
                      listed=open('/proc/sysvipc/shm').read().count(chr(10)) - 1)))
"""
    for _ in range(2 * server.cfg.exec_workers):  # reaches every slot, the creating one too
        seen = await _json_run(sb, look)
        assert seen == {"shmid": -1, "err": "ENOENT", "listed": 0}, seen
    # Nor is anything of the sandbox's left in the machine's own namespace.
    lo, hi = server.health()["uid_range"]
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    assert not [r for r in rows if lo <= int(r.split()[7]) <= hi]


async def test_posix_message_queues_are_refused(sb):
    """Their bytes count per uid until the call's IPC namespace is freed, after the call
    (test_quiet_slot.py): refused, not namespaced."""
    create = """
libc.mq_open.restype = ctypes.c_int
fd = libc.mq_open(b'/sandbox-q', os.O_CREAT | os.O_RDWR, 0o666, None)
print(json.dumps(dict(fd=fd, err=errno.errorcode.get(ctypes.get_errno()))))
"""
    assert await _json_run(sb, create) == {"fd": -1, "err": "EPERM"}


async def test_python_installation_is_read_only(sb):
    code = """
import os, sys, numpy
trees = {sys.prefix, sys.base_prefix, os.path.dirname(numpy.__file__)}
print(json.dumps({t: bool(os.statvfs(t).f_flag & os.ST_RDONLY) for t in trees}))
"""
    got = await _json_run(sb, code)
    assert got and all(got.values()), got


def test_syscall_table_matches_the_kernel_headers():
    headers = {"x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
               "aarch64": "/usr/include/asm-generic/unistd.h"}
    checked = 0
    for machine, path in headers.items():
        if not Path(path).exists():
            continue
        text, col = Path(path).read_text(), seccomp.ARCHES[machine][0]
        for name, numbers in {**seccomp.DENIED, **seccomp.IPC, **seccomp.SPECIAL}.items():
            m = re.search(rf"#define __NR(?:3264)?_{name}\s+(\d+)", text)
            assert (int(m.group(1)) if m else None) == numbers[col], (machine, name)
            checked += 1
    if not checked:
        pytest.skip("no kernel headers here")


def test_zygote_heap_is_in_huge_pages(server):
    """Speed, not isolation (sandbox/hugepages.py): fewer page-table entries to copy per fork."""
    h = server.health()
    if not h["isolation"]["huge_pages_mb"]:
        pytest.skip("the kernel refused MADV_COLLAPSE here")
    rollup = Path(f"/proc/{h['zygote_pid']}/smaps_rollup").read_text()
    huge_kb = int(re.search(r"AnonHugePages:\s+(\d+) kB", rollup).group(1))
    assert huge_kb >= 2048
