"""Run stages as a graph: each starts once its upstream stages are done and the thread budget
has room for it (issue 24). The flow (flows/rstar_full.py) uses it.

A stage takes `threads(spec)` threads from a budget of `budget` while it runs; one that asks
for more than the whole budget takes all of it (it runs alone). Ready stages start in
pipeline order, and a stage never jumps ahead of an earlier ready one that is waiting for
threads: the order stays the one a person reads in the stage table. When a stage fails, no
new stage starts; the running ones finish, then the first failure is raised (a sibling's
work is kept: its artifact is in the store for the rerun).

Each stage runs in its own thread, in a copy of the caller's context, so what the caller's
context holds (a Prefect flow run, a progress sink) is seen by the stage as if it ran inline.
If the caller's thread is interrupted while stages run (a SIGTERM the flow engine turns into
an exception, Ctrl-C), every launched stage is told through `INTERRUPT` and stops its process
tree (orchestrator/launcher.py), so the interruption ends the run instead of waiting for them.
Stages that run in the caller's process are imported first, in the caller's thread
(`import_stage_modules`): transformers, imported by two threads at once, hands one of them a
half-initialised package ("cannot import name 'AutoTokenizer'"; found by the demo).
"""

from __future__ import annotations

import contextvars
import importlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from orchestrator.stages import StageSpec
from orchestrator.store import ArtifactRef

INTERRUPT: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("graph_interrupt", default=None)
StageRun = Callable[[StageSpec, dict[str, ArtifactRef], int], ArtifactRef]  # (spec, upstream refs, threads)


def run_graph(stages: Sequence[StageSpec], run: StageRun, budget: int,
              threads: Callable[[StageSpec], int] = lambda _: 1,
              on_start: Callable[[StageSpec, int], None] | None = None) -> dict[str, ArtifactRef]:
    """Run every stage of `stages` (upstreams outside it must not exist); returns their refs by name."""
    if budget < 1:
        raise ValueError(f"the thread budget must be at least 1, got {budget}")
    names = {s.name for s in stages}
    for spec in stages:
        if missing := [u for u in spec.upstream if u not in names]:
            raise ValueError(f"stage {spec.name!r} needs {missing}, which this run does not include")
    refs: dict[str, ArtifactRef] = {}
    waiting = list(stages)
    running: dict[Future, tuple[StageSpec, int]] = {}
    free = budget
    failure: BaseException | None = None
    interrupt = threading.Event()
    with ThreadPoolExecutor(max_workers=max(len(stages), 1), thread_name_prefix="stage") as pool:
        try:
            while waiting or running:
                if failure is None:
                    for spec in [s for s in waiting if all(u in refs for u in s.upstream)]:
                        need = min(max(threads(spec), 1), budget)
                        if need > free:
                            break  # keep pipeline order: later ready stages wait behind this one
                        free -= need
                        waiting.remove(spec)
                        if on_start:
                            on_start(spec, need)
                        ctx = contextvars.copy_context()
                        ctx.run(INTERRUPT.set, interrupt)
                        ups = {u: refs[u] for u in spec.upstream}
                        running[pool.submit(ctx.run, run, spec, ups, need)] = (spec, need)
                if not running:
                    break  # a failure stopped new starts
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    spec, need = running.pop(future)
                    free += need
                    if future.exception() is not None:
                        failure = failure or future.exception()
                    else:
                        refs[spec.name] = future.result()
        except BaseException:
            interrupt.set()  # the pool's exit then waits only for the stages to stop
            raise
    if failure is not None:
        raise failure
    return refs


def interrupted() -> bool:
    """True inside a stage whose graph run was interrupted (read by the launcher's watch loop)."""
    event = INTERRUPT.get()
    return event is not None and event.is_set()


def import_stage_modules(stages: Sequence[StageSpec]) -> None:
    """Import each stage's module here, one after another, before any runs in a thread."""
    for spec in stages:
        importlib.import_module(spec.module)
