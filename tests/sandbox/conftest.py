"""Fixtures for the sandbox tests: real servers on loopback, and process-leak checks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from configs.sandbox import SandboxConfig
from sandbox.client import SandboxClient

REPO = Path(__file__).resolve().parents[2]
# Short limits keep the adversarial suite fast; cpu < wall so both limits are exercised.
TEST_CFG = SandboxConfig(timeout_s=4, cpu_time_s=1, memory_mb=512, max_output_chars=2000, max_stream_mb=8,
                         exec_workers=4, verify_workers=2, scratch_inodes=4096)


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    cfg: SandboxConfig
    log_path: Path

    def health(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/health", timeout=10) as resp:
            return json.load(resp)

    def client(self, **overrides) -> SandboxClient:
        return SandboxClient(self.cfg.model_copy(update={"urls": [self.url], **overrides}))


def start_server(cfg: SandboxConfig, log_dir: Path, python: str = sys.executable) -> Server:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = log_dir / f"sandbox-server-{port}.log"
    proc = subprocess.Popen(
        [python, "-m", "sandbox.server", "--port", str(port), "--config-json", cfg.model_dump_json(),
         "--exit-with-parent"],
        cwd=REPO, stdout=log_path.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
    )
    server = Server(f"http://127.0.0.1:{port}", proc, cfg, log_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text()[-3000:]}")
        try:
            server.health()
            return server
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def stop_server(server: Server) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory):
    if sys.platform != "linux":
        pytest.skip("the sandbox needs Linux (fork, rlimits, namespaces)")
    srv = start_server(TEST_CFG, tmp_path_factory.mktemp("sandbox"))
    yield srv
    stop_server(srv)


@pytest.fixture
async def sb(server: Server):
    async with server.client() as client:
        yield client


def processes_of_uids(lo: int, hi: int) -> list[dict]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{name}").st_uid
            if lo <= uid <= hi:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append({"pid": int(name), "uid": uid, "ppid": int(fields[1]), "state": fields[0], "cmd": cmd})
        except (OSError, IndexError, ValueError):
            continue
    return out


def leftovers(server: Server) -> list[str]:
    """What is alive or on disk beyond one fresh, idle child per slot ([] when clean)."""
    h = server.health()
    problems = []
    if h["uid_range"] is not None:
        lo, hi = h["uid_range"]
        procs = processes_of_uids(lo, hi)
        per_uid: dict[int, int] = {}
        for p in procs:
            per_uid[p["uid"]] = per_uid.get(p["uid"], 0) + 1
            if p["ppid"] != h["zygote_pid"] or "sandbox.zygote" not in p["cmd"]:
                problems.append(f"stray process {p}")
        problems += [f"uid {u} has {n} processes" for u, n in per_uid.items() if n > 1]
    if h["exec_ready"] != h["exec_workers"]:
        problems.append(f"{h['exec_ready']}/{h['exec_workers']} children ready")
    if h["isolation"]["call_namespaces"]:  # each idle child's own tmpfs scratch is its cwd
        for p in processes_of_uids(*h["uid_range"]) if h["uid_range"] else []:
            try:
                if os.listdir(f"/proc/{p['pid']}/cwd"):
                    problems.append(f"scratch of child {p['pid']} not empty")
            except FileNotFoundError:  # exited meanwhile
                continue
    else:
        for slot_dir in Path(h["scratch_root"]).glob("slot-*"):
            try:
                if any(slot_dir.iterdir()):
                    problems.append(f"{slot_dir.name} not empty")
            except FileNotFoundError:  # being recreated for the slot's next child
                problems.append(f"{slot_dir.name} being recreated")
    return problems


def assert_clean(server: Server, settle_s: float = 5.0) -> None:
    deadline = time.monotonic() + settle_s
    while (problems := leftovers(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not problems, problems


@pytest.fixture
def clean(server: Server):
    """Call to assert that no process, file or busy slot is left behind (test modules
    cannot import this conftest: tests/ has no __init__.py, by the repository's layout)."""
    return lambda: assert_clean(server)


@pytest.fixture
def check_clean():
    """assert_clean for any server: check_clean(server)."""
    return assert_clean


@pytest.fixture(scope="session")
def start_extra_server(tmp_path_factory: pytest.TempPathFactory):
    started: list[Server] = []

    def start(cfg: SandboxConfig, python: str = sys.executable) -> Server:
        started.append(start_server(cfg, tmp_path_factory.mktemp("sandbox-extra"), python))
        return started[-1]

    yield start
    for srv in started:
        stop_server(srv)
