"""configs/data.py: tiny defaults and the checks the schema makes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from configs.data import AgreementFilterConfig, ColdStartSource, DataConfig, RLCurationConfig, RLSource
from datalib.sources import COLD_START_SOURCES, RL_SOURCES


def test_tiny_defaults_need_no_download():
    cfg = DataConfig()
    assert all(s.is_synthetic for s in cfg.cold_start.sources + cfg.rl_curation.sources)
    assert any(s.agreement_filter for s in cfg.rl_curation.sources)
    assert any(not s.agreement_filter for s in cfg.rl_curation.sources)  # a non-empty tiny RL set


def test_every_source_name_has_a_normaliser():
    from typing import get_args

    from configs.data import ColdStartSourceName, RLSourceName

    assert set(get_args(ColdStartSourceName)) == set(COLD_START_SOURCES)
    assert set(get_args(RLSourceName)) == set(RL_SOURCES)


@pytest.mark.parametrize("make,message", [
    (lambda: ColdStartSource(source="toolace"), "goes with the source `synthetic` only"),
    (lambda: ColdStartSource(source="synthetic"), "set `examples`"),
    (lambda: RLSource(source="dapo_math", location="x.jsonl", problems=0), "greater than or equal to 1"),
    (lambda: ColdStartSource(source="magicoder", location="x"), "toolace"),  # unknown name lists the allowed
    (lambda: RLCurationConfig(max_answer_digits=19), "int64"),
    (lambda: AgreementFilterConfig(samples_per_problem=1, min_agreeing=2), "no problem could pass"),
])
def test_bad_values_fail_at_load_time(make, message):
    with pytest.raises(ValidationError, match=message):
        make()
