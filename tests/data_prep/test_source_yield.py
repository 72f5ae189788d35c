"""A source that gives nothing stops the stage, unless optional; one that loses most of its
rows says so in the log and on the card (issue 23, point 2)."""

from __future__ import annotations

import json
import logging

import pytest

from configs.data import RLCurationConfig, RLSource
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep import rl_curation
from datalib.intake import EmptySourceError


def _dapo(path, answers):  # noqa: ANN001
    path.write_text("".join(json.dumps({"prompt": f"Problem number {i}: what is it?", "solution": a}) + "\n"
                            for i, a in enumerate(answers)))
    return str(path)


def _run(tmp_path, sources):  # noqa: ANN001
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return rl_curation.run(RLCurationConfig(sources=sources), {}, out, rollout=RolloutConfig(),
                           sandbox=SandboxConfig()), out


def test_a_source_with_no_usable_row_fails_naming_it_unless_optional(tmp_path):
    good = _dapo(tmp_path / "good.jsonl", ["6", "7"])
    bad = _dapo(tmp_path / "bad.jsonl", ["six", "1/2", "x"])
    expected = (r"source dapo_math\.1 \(.*bad\.jsonl\) gave no usable row: 3 rows read from 1 file\(s\), 0 skipped, "
                r"rejected \{'complex_format': 2, 'not_integer': 1\}; first: .*bad\.jsonl row 0")
    with pytest.raises(EmptySourceError, match=expected):
        _run(tmp_path, [RLSource(source="dapo_math", location=good), RLSource(source="dapo_math", location=bad)])
    metrics, _ = _run(tmp_path, [RLSource(source="dapo_math", location=good),
                                 RLSource(source="dapo_math", location=bad, optional=True)])
    assert metrics["problems"] == 2


def test_a_source_that_loses_most_rows_warns_in_the_log_and_on_the_card(tmp_path, caplog):
    mostly_bad = _dapo(tmp_path / "m.jsonl", ["6", "six", "seven", "1/2"])
    with caplog.at_level(logging.WARNING):
        metrics, out = _run(tmp_path, [RLSource(source="dapo_math", location=mostly_bad)])
    assert metrics["problems"] == 1
    assert "dapo_math kept 1 of the 4 rows it read (filtered 3)" in caplog.text
    assert "**lost most of its rows:** dapo_math kept 1 of the 4 rows it read" in (out / "card.md").read_text()
