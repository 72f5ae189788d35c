"""A seccomp filter for sandbox calls: kernel facilities shared per user or per machine are refused.

In the spirit of container runtimes' default profiles (SPEC §3): whatever a call could
create that outlives it or that another call could see, and that no namespace of ours
makes private, fails with EPERM — keyrings (per uid, kept after the call), userfaultfd,
perf_event_open, bpf, io_uring, ptrace and cross-process memory access, new namespaces
(unprivileged user namespaces would let a call mount and create its own IPC objects),
mounts, chroot, module loading, kexec, reboot, swap, clock setting, quotas, handles
that bypass path permissions (open_by_handle_at), unusual personality flags. clone3
answers ENOSYS (its flags sit in memory the filter cannot read), so libc falls back to
clone, whose namespace flags are checked. System V IPC is made private by the call's own
IPC namespace (where there is none it is refused too); POSIX message queues and SHM_LOCK are
refused always, as what they hold counts per uid until after the call (issue 22, point 3).
A foreign syscall ABI (i386 `int 0x80`, x32) kills the process: its numbers differ.

The program is built by hand (a few µs) rather than through libseccomp: no native
dependency, and building it costs nothing per call (NOTES: libseccomp per child 9–16 ms).
It is installed in each child after its setup, which itself needs unshare and mount.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable

# name: (x86_64, aarch64 / asm-generic) syscall numbers, from the kernel's uapi headers
# (tests/sandbox/test_seccomp.py checks them against /usr/include where present).
DENIED = {
    "ptrace": (101, 117), "syslog": (103, 116), "vhangup": (153, 58), "modify_ldt": (154, None),
    "pivot_root": (155, 41), "_sysctl": (156, None), "ustat": (136, None), "sysfs": (139, None),
    "acct": (163, 89), "settimeofday": (164, 170), "mount": (165, 40), "umount2": (166, 39),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "sethostname": (170, 161),
    "setdomainname": (171, 162), "iopl": (172, None), "ioperm": (173, None), "create_module": (174, None),
    "init_module": (175, 105), "delete_module": (176, 106), "get_kernel_syms": (177, None),
    "query_module": (178, None), "quotactl": (179, 60), "nfsservctl": (180, 42), "lookup_dcookie": (212, 18),
    "clock_settime": (227, 112), "clock_adjtime": (305, 266), "chroot": (161, 51), "uselib": (134, None),
    "kexec_load": (246, 104), "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "unshare": (272, 97), "perf_event_open": (298, 241), "fanotify_init": (300, 262),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265), "setns": (308, 268),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "finit_module": (313, 273), "kexec_file_load": (320, 294), "bpf": (321, 280), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "pidfd_getfd": (438, 438), "process_madvise": (440, 440),
    "mount_setattr": (442, 442), "quotactl_fd": (443, 443),
    # POSIX message queues: their bytes count per uid (RLIMIT_MSGQUEUE) until the call's IPC
    # namespace is freed, which the kernel does after the call, in a work queue: the slot's
    # next call could find its budget spent (issue 22, point 3).
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
}
# Refused only where the call has no IPC namespace of its own.
IPC = {
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197), "semget": (64, 190),
    "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192), "msgget": (68, 186),
    "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
}
SPECIAL = {"clone": (56, 220), "clone3": (435, 435), "personality": (135, 92)}
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # index into the tuples, AUDIT_ARCH_*
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # what Docker's profile allows
X32_BIT = 0x40000000

LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL = 0x7FFF0000, 0x80000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
NR_OFF, ARCH_OFF, ARG0_LO_OFF, ARG1_LO_OFF = 0, 4, 16, 24  # struct seccomp_data, little-endian
SHM_LOCK, SHM_UNLOCK = 11, 12  # shmctl commands: locked segments count per uid (RLIMIT_MEMLOCK), as above


def _errno(code: int) -> int:
    return 0x00050000 | code


def build(refuse_ipc: bool, machine: str | None = None) -> bytes | None:
    """The BPF program as packed `struct sock_filter`s; None on an architecture we have no table for."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        return None
    col, audit_arch = ARCHES[machine]
    ins: list[tuple[int, int, int, int]] = []

    def deny(nr: int, action: int) -> None:
        ins.extend([(JEQ, 0, 1, nr), (RET, 0, 0, action)])

    ins += [(LD_W_ABS, 0, 0, ARCH_OFF), (JEQ, 1, 0, audit_arch), (RET, 0, 0, RET_KILL), (LD_W_ABS, 0, 0, NR_OFF)]
    if machine == "x86_64":
        ins += [(JGE, 0, 1, X32_BIT), (RET, 0, 0, RET_KILL)]
    table = {**DENIED, **(IPC if refuse_ipc else {})}
    for nr in sorted({v[col] for v in table.values() if v[col] is not None}):
        deny(nr, _errno(errno.EPERM))
    deny(SPECIAL["clone3"][col], _errno(errno.ENOSYS))
    # clone: EPERM when any namespace flag is set (the accumulator is reloaded, so last).
    ins += [(JEQ, 0, 4, SPECIAL["clone"][col]), (LD_W_ABS, 0, 0, ARG0_LO_OFF), (JSET, 0, 1, CLONE_NEW_FLAGS),
            (RET, 0, 0, _errno(errno.EPERM)), (RET, 0, 0, RET_ALLOW)]
    n = len(PERSONALITIES)
    ins += [(JEQ, 0, n + 3, SPECIAL["personality"][col]), (LD_W_ABS, 0, 0, ARG0_LO_OFF)]  # else: the next rule
    ins += [(JEQ, n - i, 0, value) for i, value in enumerate(PERSONALITIES)]
    ins += [(RET, 0, 0, _errno(errno.EPERM)), (RET, 0, 0, RET_ALLOW)]
    # shmctl: EPERM for SHM_LOCK and SHM_UNLOCK, any other command allowed.
    ins += [(JEQ, 0, 5, IPC["shmctl"][col]), (LD_W_ABS, 0, 0, ARG1_LO_OFF), (JEQ, 1, 0, SHM_LOCK),
            (JEQ, 0, 1, SHM_UNLOCK), (RET, 0, 0, _errno(errno.EPERM)), (RET, 0, 0, RET_ALLOW)]
    ins.append((RET, 0, 0, RET_ALLOW))
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def loader(program: bytes) -> Callable[[], None]:
    """A function that loads the filter into the calling process (and so into everything
    it starts). Prepared once in the zygote, so a child pays only the prctl. The caller
    must have set PR_SET_NO_NEW_PRIVS (or be root)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl, arg = libc.prctl, ctypes.byref(prog)

    def load() -> None:
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, arg, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp filter: {os.strerror(err)}")

    load.keep = (buf, prog)  # type: ignore[attr-defined]  # the kernel reads them at load time
    return load
