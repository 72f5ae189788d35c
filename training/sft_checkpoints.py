"""Which of TRL's SFT checkpoints a rerun resumes from (issue 23, point 5).

TRL (transformers' Trainer) writes `checkpoint-N/` in place: weights, then optimizer,
scheduler and RNG states, then `trainer_state.json`, then it deletes older checkpoints. A
run killed in the middle leaves a `checkpoint-N/` that `get_last_checkpoint` would pick
and `resume_from_checkpoint` would fail on, every time. Here a checkpoint counts only when
every part is there and whole: `trainer_state.json` parses, each safetensors file's header
parses and the file is as long as the header says, each `.pt`/`.pth` state is a whole zip
archive (torch's format). A newer incomplete one is moved aside to `incomplete/` with a
warning, never deleted and never fatal; the newest complete one is resumed from.
"""

from __future__ import annotations

import json
import logging
import re
import struct
import time
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def _safetensors_problem(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
    except (OSError, struct.error, ValueError) as err:
        return f"{path.name}: unreadable header ({type(err).__name__})"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if path.stat().st_size < 8 + size + end:
        return f"{path.name}: {path.stat().st_size} bytes, the header needs {8 + size + end}"
    return None


def _zip_problem(path: Path) -> str | None:
    if not zipfile.is_zipfile(path):
        return f"{path.name}: not a whole torch archive"
    return None


def incomplete(ckpt: Path) -> str | None:
    """Why `ckpt` cannot be resumed from, or None when every part is there and whole."""
    try:
        state = json.loads((ckpt / "trainer_state.json").read_text())
        state["global_step"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"trainer_state.json missing or unreadable ({type(err).__name__})"
    weights = sorted(ckpt.glob("*.safetensors"))
    index = ckpt / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError) as err:
            return f"{index.name} unreadable ({type(err).__name__})"
        if missing := sorted(s for s in shards if not (ckpt / s).exists()):
            return f"weight shards missing: {missing[:3]}"
    if not weights and not (ckpt / "pytorch_model.bin").exists():
        return "no model weights"
    for w in weights:
        if problem := _safetensors_problem(w):
            return problem
    deepspeed = any(ckpt.glob("global_step*"))  # ZeRO keeps its optimizer shards there
    if not deepspeed and not (ckpt / "optimizer.pt").exists():
        return "no optimizer.pt"
    rng = sorted(ckpt.glob("rng_state*.pth"))
    if not rng:
        return "no rng_state*.pth"
    for f in [*ckpt.glob("*.pt"), *rng]:
        if problem := _zip_problem(f):
            return problem
    return None


def resume_checkpoint(trainer_dir: Path, main_process: bool = True) -> str | None:
    """The newest complete checkpoint under `trainer_dir` (a path string for TRL), or None.
    Newer incomplete ones are set aside by the main process (every process picks the same)."""
    if not trainer_dir.is_dir():
        return None
    found = sorted(((int(m.group(1)), p) for p in trainer_dir.iterdir()
                    if p.is_dir() and (m := _CHECKPOINT.match(p.name))), reverse=True)
    for _, ckpt in found:
        problem = incomplete(ckpt)
        if problem is None:
            return str(ckpt)
        if main_process:
            aside = trainer_dir / "incomplete" / f"{ckpt.name}-{time.strftime('%Y%m%d-%H%M%S')}"
            aside.parent.mkdir(exist_ok=True)
            ckpt.rename(aside)
            log.warning("sft: %s is incomplete (%s), probably cut by a kill; set aside as %s", ckpt, problem, aside)
    return None
