"""Run a long stage as a watched child process (SPEC §10).

The Prefect task calls `launch_stage` for a stage declared `long_running`. It writes the
exact resolved config and upstream refs into the stage's work dir, starts

    python -m <module> --stage <name> --config-json <work>/launch.json
    accelerate launch [--config_file …] --num_processes N … -m <module> … (more than one process)

under orchestrator/supervisor.py in a session of its own, streams the child's output lines
to `on_line` (the Prefect run logger), turns its progress marker lines back into
`progress.report`, and reads the artifact ref the child committed. On a non-zero exit it
raises with the child's last lines; when `should_cancel()` turns true, or the caller is
interrupted (SIGTERM from a Prefect worker cancelling the flow run, Ctrl-C), the whole
process tree is stopped before the exception propagates. If the caller is killed
outright, the supervisor's parent-death signal stops the tree.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from configs.schema import HardwareConfig, PipelineConfig
from orchestrator.graph import interrupted
from orchestrator.keys import stage_key
from orchestrator.runner import LAUNCHED_ENV, ensure_implemented
from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef, ArtifactStore
from orchestrator.supervisor import GRACE_ENV, PARENT_ENV
from stagekit import progress
from stagekit.paths import REPO_ROOT, resolve_local
from stagekit.workdir import WorkDir

log = logging.getLogger(__name__)

RESULT_ENV = "RSTAR_RESULT_FILE"  # where the child's rank 0 writes the committed ArtifactRef
PROGRESS_ENV = "RSTAR_PROGRESS_LINES"  # "1": the child prints progress marker lines
TAIL_LINES = 40


class StageFailedError(RuntimeError):
    pass


class StageCancelledError(RuntimeError):
    pass


@dataclass
class LaunchHooks:
    on_line: Callable[[str], None] = field(default=lambda line: log.info("%s", line))
    should_cancel: Callable[[], bool] | None = None  # polled every `cancel_poll_s`
    cancel_poll_s: float = 2.0
    grace_s: float = 3.0  # SIGTERM -> SIGKILL for the child's processes


def stage_command(spec: StageSpec, hw: HardwareConfig, request: Path) -> list[str]:
    """The child's command line: plain Python for one process, accelerate for more (stages
    that train across processes only)."""
    stage_args = ["-m", spec.module, "--stage", spec.name, "--config-json", str(request)]
    total = hw.processes * hw.nodes if spec.distributed else 1
    if total <= 1:
        return [sys.executable, *stage_args]
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if hw.accelerate_config:
        cmd += ["--config_file", str(resolve_local(hw.accelerate_config))]
    else:
        # Without a config file, `--multi_gpu` is what starts N processes, on CPU too:
        # `--cpu --num_processes 2` starts one (NOTES.md, accelerate 1.15).
        cmd += ["--multi_gpu"]
    cmd += ["--num_processes", str(total), "--num_machines", str(hw.nodes)]
    if hw.nodes > 1:
        # This task starts its own node's share; the others run the same command with
        # their rank (README, Scaling out).
        cmd += ["--machine_rank", os.environ.get("RSTAR_MACHINE_RANK", "0")]
        if addr := os.environ.get("RSTAR_MAIN_PROCESS_IP"):
            cmd += ["--main_process_ip", addr]
    return [*cmd, *stage_args]


# A child's output goes to logs (a Prefect task run's, a file), never to a terminal: library
# progress bars (tqdm, which transformers, TRL and datasets draw with) would fill them with
# redrawn lines. The stage's own progress travels on its progress channel instead.
QUIET_BARS = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def thread_env(spec: StageSpec, cfg: PipelineConfig, threads: int | None) -> dict[str, str]:
    """The environment that gives a launched stage `threads` CPU threads, split over its processes."""
    if threads is None:
        return {}
    processes = cfg.hardware.processes if spec.distributed else 1
    return {"OMP_NUM_THREADS": str(max(1, threads // processes))}


def launch_stage(
    spec: StageSpec,
    cfg: PipelineConfig,
    upstream: dict[str, ArtifactRef],
    store: ArtifactStore,
    force: bool = False,
    hooks: LaunchHooks | None = None,
    env: dict[str, str] | None = None,
) -> ArtifactRef:
    """`env`: variables set for the child only, over this process's environment."""
    hooks = hooks or LaunchHooks()
    ensure_implemented(spec)
    key = stage_key(spec, cfg, upstream)
    if not force and (ref := store.lookup(spec.name, key)) is not None:
        return ref  # no process for a cache hit
    work = WorkDir(store.work_root, spec.name, key)
    with work.lock(wait=True):  # a second launch of the same stage waits for the first, then reuses it
        if not force and (ref := store.lookup(spec.name, key)) is not None:
            return ref
        work.start_attempt()
        request = work.path / "launch.json"
        request.write_text(json.dumps({
            "stage": spec.name, "key": key, "force": force, "config": cfg.model_dump(mode="json"),
            "upstream": {n: r.model_dump() for n, r in upstream.items()},
        }, indent=1))
        result = work.path / "result.json"
        result.unlink(missing_ok=True)
        cmd = stage_command(spec, cfg.hardware, request)
        env = {**os.environ, **QUIET_BARS, **(env or {}), LAUNCHED_ENV: "1", PROGRESS_ENV: "1", RESULT_ENV: str(result),
               PARENT_ENV: str(os.getpid()), GRACE_ENV: str(hooks.grace_s), "PYTHONUNBUFFERED": "1"}
        log.info("stage %s: launching %s", spec.name, " ".join(cmd))
        with open(work.path / "output.log", "a") as out_log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "orchestrator.supervisor", "--", *cmd], cwd=REPO_ROOT, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the task's process group never hits it by accident
            )
            rc, tail = _watch(proc, spec.name, hooks, out_log)
        if rc != 0:
            raise StageFailedError(
                f"stage {spec.name!r} exited with {_describe(rc)}; its work dir {work.path} is kept "
                f"for a resume. Last lines:\n" + "\n".join(_error_lines(tail))
            )
        if not result.exists():
            raise StageFailedError(f"stage {spec.name!r} exited 0 but wrote no result to {result}")
        ref = ArtifactRef.model_validate_json(result.read_text())
        work.remove()
    return ref


def _watch(proc: subprocess.Popen, stage: str, hooks: LaunchHooks, out_log) -> tuple[int, deque[str]]:
    lines: queue.Queue[str | None] = queue.Queue()
    tail: deque[str] = deque(maxlen=400)

    def read() -> None:
        for raw in iter(proc.stdout.readline, b""):
            lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, name=f"{stage}-output", daemon=True)
    reader.start()
    next_poll = time.monotonic() + hooks.cancel_poll_s
    try:
        while True:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                line = ""
            if line is None:
                break
            line, mark = progress.split_marker(line)
            if mark is not None:
                progress.report(mark[0], 100.0, mark[1])
            if line.strip() if mark is not None else line:  # a marker's blank prefix is no output
                tail.append(line)
                out_log.write(line + "\n")
                hooks.on_line(line)
            if interrupted():
                raise StageCancelledError(f"stage {stage!r} was stopped: the run it belongs to was interrupted")
            if hooks.should_cancel is not None and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + hooks.cancel_poll_s
                if _asks_to_cancel(hooks):
                    raise StageCancelledError(f"stage {stage!r} was cancelled; its processes were stopped")
        return proc.wait(), tail
    except BaseException:
        stop(proc, hooks.grace_s)
        raise
    finally:
        out_log.flush()


def _asks_to_cancel(hooks: LaunchHooks) -> bool:
    try:
        return bool(hooks.should_cancel())
    except Exception as e:  # the API being unreachable for a moment must not kill a long stage
        log.warning("could not check for cancellation (%s); the stage keeps running", e)
        return False


def stop(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop the supervisor and everything under it; never returns with one left running."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the supervisor stops its tree, then exits
        try:
            proc.wait(timeout=grace_s + 15)
        except subprocess.TimeoutExpired:
            pass
    # Fallback if the supervisor could not: its session, then what we saw under it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()


def _describe(rc: int) -> str:
    if rc > 128 and (rc - 128) in signal.valid_signals():
        return f"exit code {rc} (killed by {signal.Signals(rc - 128).name})"
    return f"exit code {rc}"


def _error_lines(tail: deque[str]) -> list[str]:
    """The child's last traceback if there is one in the tail, else its last lines."""
    lines = list(tail)
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    picked = lines[starts[-1]:] if starts else lines
    return picked[-TAIL_LINES:]
