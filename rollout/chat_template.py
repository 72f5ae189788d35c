"""The chat templates our tokenizers carry.

We use the original Qwen3 template as TRL ships it (`trl/chat_templates/qwen3.jinja`),
so tiny and real runs render conversations exactly like Qwen3, and TRL recognises it
by string. The `training` variant (TRL's `qwen3_training.jinja`, prefix-preserving with
generation markers) is saved as a named template for assistant-only SFT loss.
"""

from __future__ import annotations

from pathlib import Path

import trl


def _trl_template(name: str) -> str:
    return (Path(trl.__file__).parent / "chat_templates" / name).read_text()


def qwen3_templates() -> dict[str, str]:
    return {"default": _trl_template("qwen3.jinja"), "training": _trl_template("qwen3_training.jinja")}
