"""Fail before any work when a config needs accelerators this machine lacks."""

from __future__ import annotations

from configs.schema import HardwareConfig


class HardwareError(RuntimeError):
    pass


def check_hardware(hw: HardwareConfig, config_name: str = "config", stage: str | None = None) -> None:
    if hw.gpus_per_node <= 0:
        return
    import torch  # deferred: importing torch costs seconds and CPU configs never need it

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found < hw.gpus_per_node:
        who = f"stage {stage!r} of {config_name}" if stage else config_name
        raise HardwareError(
            f"{who} needs {hw.gpus_per_node} GPU(s) per node on {hw.nodes} node(s) "
            f"(hardware.gpus_per_node), but this machine has {found}. Run configs/tiny.yaml here, "
            f"or launch on a GPU cluster (see README, 'Scaling out')."
        )
