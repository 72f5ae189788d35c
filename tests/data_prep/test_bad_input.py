"""Bad input: malformed rows go to the rejects file and the stage goes on; a wrong dataset
for a source fails at once, naming the source and the missing fields."""

from __future__ import annotations

import json

import pytest

from configs.data import ColdStartConfig, ColdStartSource, RLCurationConfig, RLSource
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from data_prep import cold_start, rl_curation
from datalib.records import SourceSchemaError

SYSTEM = ("SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -\n"
          + json.dumps({"name": "get_x", "description": "X.", "parameters": {
              "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}, indent=4) + "\n")


def _chat(call: str) -> str:
    return (f"USER: x please\n\n\nASSISTANT: <functioncall> {call} <|endoftext|>\n\n\n"
            "FUNCTION RESPONSE: {\"x\": 1}\n\n\nASSISTANT: x is 1 <|endoftext|>\n\n\n")


GLAIVE_LINES = [
    json.dumps({"system": SYSTEM, "chat": _chat('{"name": "get_x", "arguments": \'{"a": 1}\'}')}),  # fine
    '{"system": "SYSTEM: broken',                                                                 # not JSON
    json.dumps({"system": SYSTEM}),                                                               # no chat
    json.dumps({"system": SYSTEM, "chat": 5}),                                                    # wrong type
    json.dumps({"system": SYSTEM, "chat": _chat('{"name": get_x}')}),                              # bad call
    json.dumps({"system": SYSTEM, "chat": _chat('{"name": "get_x", "arguments": \'{"a": }\'}')}),  # bad JSON str
    json.dumps([1, 2]),                                                                           # not an object
    json.dumps({"system": SYSTEM, "chat": _chat('{"name": "get_y", "arguments": \'{}\'}')}),       # unknown tool
    json.dumps({"system": SYSTEM + "{\"name\": ", "chat": _chat("{}")}),                           # bad tool JSON
]
EXPECTED = {1: "invalid_json", 2: "missing_field", 3: "wrong_type", 4: "unparseable_call", 5: "invalid_json",
            6: "not_an_object", 7: "unknown_tool", 8: "invalid_json"}


def test_malformed_rows_go_to_rejects_with_file_row_reason(tmp_path):
    path = tmp_path / "glaive.jsonl"
    path.write_text("\n".join(GLAIVE_LINES) + "\n")
    cfg = ColdStartConfig(sources=[ColdStartSource(source="glaive_fc_v2", location=str(path))])
    metrics = cold_start.run(cfg, {}, tmp_path)
    assert metrics["examples"] == 1 and metrics["rejected_malformed"] == len(EXPECTED)
    rejects = [json.loads(x) for x in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert {r["row"]: r["reason"] for r in rejects} == EXPECTED
    assert all(r["file"] == str(path) and r["source"] == "glaive_fc_v2" and r["kind"] == "malformed"
               for r in rejects)
    card = (tmp_path / "card.md").read_text()
    assert "| malformed | glaive_fc_v2 | invalid_json | 3 |" in card
    assert "| malformed | glaive_fc_v2 | unknown_tool | 1 |" in card


def test_wrong_dataset_fails_fast_naming_source_and_fields(tmp_path):
    path = tmp_path / "tulu_like.jsonl"
    path.write_text(json.dumps({"id": "1", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    cfg = ColdStartConfig(sources=[ColdStartSource(source="glaive_fc_v2", location=str(path))])
    with pytest.raises(SourceSchemaError) as err:
        cold_start.run(cfg, {}, tmp_path)
    message = str(err.value)
    assert "glaive_fc_v2" in message and "'system'" in message and "'chat'" in message and str(path) in message


def test_wrong_dataset_fails_fast_on_real_rows(shared_data, tmp_path):
    cfg = RLCurationConfig(sources=[RLSource(source="dapo_math",
                                             location=str(shared_data / "samples" / "tulu_3_sft_mixture.jsonl"))])
    with pytest.raises(SourceSchemaError, match=r"dapo_math.*\['prompt', 'reward_model\|solution'\]"):
        rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())


def test_rl_rows_dropped_by_reason(tmp_path):
    def dapo(problem: str, answer: object) -> dict:
        return {"prompt": [{"role": "user", "content": problem}], "reward_model": {"ground_truth": answer}}

    rows = [dapo("What is 6 times 7?", "42"), dapo("What is 6 times 7?", "42"),      # duplicate
            dapo("Half of one?", "\\frac{1}{2}"), dapo("Big?", "6.5e27330467"),      # not_integer, too_large
            {"prompt": "Only a prompt"}, dapo("Typed?", 7), {"prompt": 3, "solution": "1"},
            {"prompt": "Processed layout", "solution": "1,000"}]
    path = tmp_path / "dapo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RLCurationConfig(sources=[RLSource(source="dapo_math", location=str(path))])
    metrics = rl_curation.run(cfg, {}, tmp_path, rollout=RolloutConfig(), sandbox=SandboxConfig())
    rejects = {r["row"]: r["reason"] for r in map(json.loads, (tmp_path / "rejects.jsonl").read_text().splitlines())}
    assert rejects == {1: "duplicate", 2: "not_integer", 3: "too_large", 4: "missing_field", 6: "wrong_type"}
    assert metrics["problems"] == 3 and metrics["duplicates"] == 1 and metrics["filter_ran"] == 0
