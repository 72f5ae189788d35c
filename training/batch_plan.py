"""How a global batch splits into per-device micro-batches and accumulation steps (SPEC §7).

The recipe fixes the global batch (128 conversations for SFT); per-device batch and the
number of processes are for performance. Accumulation is derived, never set, and a
combination that cannot make the global batch exactly is an error, not a rounding.
"""

from __future__ import annotations

from dataclasses import dataclass


class BatchPlanError(ValueError):
    pass


@dataclass(frozen=True)
class BatchPlan:
    global_batch: int  # sequences per optimizer step, over all processes
    micro_batch_per_device: int  # sequences per forward pass on one process
    processes: int  # data-parallel processes (GPUs, or CPU processes under gloo)
    accumulation: int  # micro-batches per process per optimizer step

    @classmethod
    def make(cls, global_batch: int, micro_batch_per_device: int, processes: int) -> BatchPlan:
        per_step = micro_batch_per_device * processes
        if global_batch % per_step:
            fits = [m for m in range(1, global_batch + 1) if global_batch % (m * processes) == 0]
            if not fits:
                raise BatchPlanError(f"global batch {global_batch} cannot be split over {processes} processes: "
                                     "use a process count that divides it")
            raise BatchPlanError(
                f"global batch {global_batch} is not a multiple of micro_batch_per_device "
                f"({micro_batch_per_device}) x processes ({processes}) = {per_step}. With {processes} "
                f"process(es), micro_batch_per_device may be one of {fits[:12]}"
                + (" ..." if len(fits) > 12 else "")
            )
        return cls(global_batch, micro_batch_per_device, processes, global_batch // per_step)
