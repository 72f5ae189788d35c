"""Config section `sandbox` (SPEC §3). Owned by the sandbox package; defaults live here.

The same model configures the client (urls, batching, retries) and the server it starts
locally when `urls` is empty; a remote server is started with its own copy
(`python -m sandbox.server --config-json '{...}'`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from configs.fields import operational


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)  # defaults typed as if loaded: same key

    # --- client side ---
    urls: list[str] = operational([])  # empty: start a local service on loopback for this run
    batch_window_ms: float = operational(5.0)  # a batch leaves when full or this long after its first call
    max_batch_calls: int = operational(64, ge=1)  # calls (or answer pairs) per HTTP request, SPEC §3
    request_timeout_s: float = operational(600.0)  # one HTTP request; a batch queues behind others on the server
    retry_attempts: int = operational(3, ge=1)  # servers tried for one batch before it is answered as failed
    server_cooldown_s: float = operational(5.0)  # a server that failed is skipped this long
    startup_timeout_s: float = operational(120.0)  # local server: imports + zygote warm-up + verify workers

    # --- limits of one call (SPEC §3) ---
    timeout_s: float = 10.0  # wall-clock limit of one call
    cpu_time_s: int = Field(10, ge=1)  # RLIMIT_CPU of each process of a call
    memory_mb: int = Field(1024, ge=64)  # address space a call may add on top of the preloaded image
    file_size_mb: int = Field(64, ge=1)  # RLIMIT_FSIZE: largest file a call may write
    max_open_files: int = Field(64, ge=16)  # RLIMIT_NOFILE
    max_processes: int = Field(32, ge=1)  # RLIMIT_NPROC of the slot's uid: processes + threads
    max_output_chars: int = Field(4096, ge=64)  # feedback longer than this is cut in the middle
    max_stream_mb: int = Field(16, ge=1)  # bytes read from stdout/stderr before the call is stopped
    scratch_mb: int = Field(256, ge=16)  # size of each call's own tmpfs scratch (its cwd, HOME, TMPDIR)
    scratch_inodes: int = Field(16384, ge=64)  # files + directories a call may create in its scratch

    # --- server side ---
    exec_workers: int | None = operational(None)  # concurrent calls; None: 4 per CPU core of the serving machine
    verify_workers: int = operational(2, ge=1)  # math-verify worker processes
    max_request_items: int = operational(4096, ge=1)  # calls (or answer pairs) one HTTP request may carry
    idle_connection_s: float = operational(30.0, gt=0)  # an idle keep-alive connection is closed after this
    verify_timeout_s: int = Field(5, ge=1)  # math-verify's own timeout (signal.alarm, whole seconds)
    verify_kill_after_s: float = 20.0  # a worker busy this long on one pair is killed and replaced
    verify_memory_mb: int = Field(4096, ge=256)  # address space a verify worker may add after warm-up
    uid_base: int = operational(61000, ge=1000)  # slot k runs as uid/gid uid_base + k when started as root
    drop_privileges: bool = True  # as root, run calls as per-slot uids; False only to exercise the fallback
    isolate_network: bool = True  # enter a network namespace once, in the zygote
    private_tmp: bool = True  # mount namespace: read-only /tmp, /var/tmp, /dev/shm; a tmpfs scratch per call
    seccomp: bool = True  # refuse per-user/per-machine kernel facilities (sandbox/seccomp.py) in every call
    # Calls see a root built from an allowlist (sandbox/call_root.py): Python, its libraries,
    # a minimal /etc and /dev, their own /proc and scratch. Off, or where it cannot be built:
    # the host's tree with `hidden_paths` and /tmp covered.
    allowlisted_root: bool = True
    # Covered in the fallback; in the allowlisted root, sys.path entries under these are left out.
    hidden_paths: list[str] = ["/root", "/home"]
    # Also hide this repository (artifacts, configs) and ../shared (data, benchmark answers):
    # a program must not find reference answers on disk either. Add other data roots above.
    hide_project_data: bool = True
    # Imported (and sympy warmed) once in the zygote. Each preloaded MB costs every call
    # ~50 µs of fork + exit: scipy.linalg/special/optimize/integrate would add ~5 ms per call,
    # while importing one of them inside a call costs 0.3-0.5 s (scipy.stats 1.2 s). Add them
    # when more than ~1 % of calls use them.
    # Back the zygote's heap with huge pages (sandbox/hugepages.py): cheaper fork and exit per call.
    huge_pages: bool = operational(True)
    preload_modules: list[str] = operational([
        "numpy",
        "scipy",
        "sympy",
        "fractions",
        "decimal",
        "itertools",
        "functools",
        "collections",
        "statistics",
        "heapq",
        "bisect",
        "random",
        "re",
    ])

    @model_validator(mode="after")
    def _limits_fit(self) -> SandboxConfig:
        if self.verify_kill_after_s <= self.verify_timeout_s:
            raise ValueError("verify_kill_after_s must exceed verify_timeout_s")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        return self
