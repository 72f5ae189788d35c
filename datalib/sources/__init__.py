"""One normaliser per source (SPEC §8), registered by the names configs/data.py allows.

A cold-start normaliser turns one raw row into an `SFTExample`; an RL normaliser
extracts a `RawProblem` (the stage then normalises the answer to an int). Both raise
`MalformedRow` / `FilteredRow` for a row they cannot or should not keep.
"""

from __future__ import annotations

from datalib.sources import (
    apigen_mt,
    dapo_math,
    glaive,
    magicoder,
    nemotron,
    openmathreasoning,
    project_euler,
    synthetic,
    toolace,
    tulu,
)
from datalib.sources.format import SourceFormat

COLD_START_SOURCES: dict[str, SourceFormat] = {
    "toolace": toolace.FORMAT,
    "apigen_mt": apigen_mt.FORMAT,
    "glaive_fc_v2": glaive.FORMAT,
    "magicoder_oss": magicoder.OSS_FORMAT,
    "magicoder_evol": magicoder.EVOL_FORMAT,
    "tulu3": tulu.FORMAT,
    "nemotron_chat": nemotron.FORMAT,
    "synthetic": synthetic.SFT_FORMAT,
}

RL_SOURCES: dict[str, SourceFormat] = {
    "dapo_math": dapo_math.FORMAT,
    "openmathreasoning": openmathreasoning.FORMAT,
    "project_euler": project_euler.FORMAT,
    "synthetic": synthetic.RL_FORMAT,
}
