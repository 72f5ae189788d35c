"""Every real sample row through its normaliser, rendered with the project's chat template."""

from __future__ import annotations

import pytest

from datalib.reader import SourceRows
from datalib.records import RowError
from datalib.sources import COLD_START_SOURCES, RL_SOURCES

SFT_SAMPLES = {
    "toolace": "toolace__DERIVED_lossy_sharegpt.jsonl",
    "glaive_fc_v2": "glaive_function_calling_v2.jsonl",
    "magicoder_oss": "magicoder_oss_instruct_75k.jsonl",
    "magicoder_evol": "magicoder_evol_instruct_110k.jsonl",
    "tulu3": "tulu_3_sft_mixture.jsonl",
}


@pytest.mark.parametrize("source", sorted(SFT_SAMPLES))
def test_every_real_cold_start_row_normalises_and_renders(shared_data, assert_renders, source):
    rows = SourceRows(str(shared_data / "samples" / SFT_SAMPLES[source]))
    fmt = COLD_START_SOURCES[source]
    rows.check_fields(source, fmt.required_fields)
    n = 0
    for raw in rows.iter():
        example = fmt.normalise(raw.data, f"{source}-{raw.row}")
        row = example.to_row()
        assert row["messages"][-1]["role"] == "assistant"
        assert_renders(row)
        n += 1
    assert n == len(rows) > 0


def test_toolace_names_with_spaces_are_recovered(shared_data):
    """The derived file cut `Market Trends API` to `API`; we resolve every call to a declared tool."""
    rows = SourceRows(str(shared_data / "samples" / SFT_SAMPLES["toolace"]))
    calls = []
    for raw in rows.iter():
        example = COLD_START_SOURCES["toolace"].normalise(raw.data, "x")
        names = {t["function"]["name"] for t in example.tools}
        assert all(t["function"]["parameters"]["type"] == "object" for t in example.tools)  # "dict" converted
        calls += [c.name for m in example.messages for c in m.tool_calls]
        assert {c for m in example.messages for c in (x.name for x in m.tool_calls)} <= names
    assert "Market Trends API" in calls and "SEC Filings" in calls and "Get Zip Code Information" in calls
    assert "API" not in calls


def test_glaive_quoted_arguments_become_objects(shared_data):
    rows = SourceRows(str(shared_data / "samples" / SFT_SAMPLES["glaive_fc_v2"]))
    raw = next(r for r in rows.iter() if r.row == 1)
    example = COLD_START_SOURCES["glaive_fc_v2"].normalise(raw.data, "x")
    calls = [c for m in example.messages for c in m.tool_calls]
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_news_headlines", {"country": "United States"}), ("get_news_headlines", {"country": "France"})]
    assert not any("<|endoftext|>" in m.content for m in example.messages)
    assert [m.role for m in example.messages].count("tool") == 2


def test_magicoder_becomes_a_function_call(shared_data):
    rows = SourceRows(str(shared_data / "samples" / "magicoder_evol_instruct_110k.jsonl"))
    example = COLD_START_SOURCES["magicoder_evol"].normalise(next(rows.iter()).data, "x")
    roles = [m.role for m in example.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    (call,) = example.messages[1].tool_calls
    assert call.name == "submit_code" and call.arguments["language"] == "python"
    assert "while i < n:" in call.arguments["code"] and "```" not in call.arguments["code"]
    assert example.messages[3].content.startswith("In the given code")


@pytest.mark.parametrize("source,file,expected", [
    ("dapo_math", "dapo_math_17k.jsonl", [34, 113, -3]),
])
def test_every_real_rl_row_normalises(shared_data, source, file, expected):
    from datalib.integers import parse_integer

    rows = SourceRows(str(shared_data / "samples" / file))
    got = []
    for raw in rows.iter():
        problem = RL_SOURCES[source].normalise(raw.data)
        assert "Answer:" not in problem.problem and problem.problem.startswith(("In triangle", "Let"))
        got.append(parse_integer(problem.answer, 18))
    assert got == expected


def test_project_euler_rows(shared_data):
    from datalib.integers import parse_integer

    rows = SourceRows(str(shared_data / "samples" / "project_euler.jsonl"))
    kept, reasons = [], []
    for raw in rows.iter():
        try:
            kept.append(parse_integer(RL_SOURCES["project_euler"].normalise(raw.data).answer, 18))
        except RowError as e:
            reasons.append(e.reason)
    assert sorted(reasons) == sorted(["needs_attachment"] * 3 + ["complex_format"] * 2 + ["not_integer"])
    assert len(kept) == 14 and 233168 in kept and 1517926517777556 in kept
