"""SFT data and template (issue 10 point 1): loss on exactly the assistant turns, Qwen3's
rendering, and the same tokens the rollout produces for the same conversation."""

from __future__ import annotations

import json
import re

import pytest
from transformers import AutoTokenizer

from configs.data import ColdStartConfig, ColdStartSource
from data_prep import cold_start
from rollout.chat_template import qwen3_templates
from rollout.prompt import ChatFormat
from training.batch_plan import BatchPlan, BatchPlanError
from training.sft_data import SFTDataError, chat_rows, training_tokenizer

SAMPLES = {"glaive_fc_v2": "glaive_function_calling_v2.jsonl", "toolace": "toolace__DERIVED_lossy_sharegpt.jsonl",
           "magicoder_oss": "magicoder_oss_instruct_75k.jsonl", "magicoder_evol": "magicoder_evol_instruct_110k.jsonl",
           "tulu3": "tulu_3_sft_mixture.jsonl"}
EMPTY_THINK = "<think>\n\n</think>\n\n"
ASSISTANT_TURN = re.compile(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>\n)", re.DOTALL)


def _cold_start(tmp_path, sources: list[ColdStartSource]):
    out = tmp_path / "cold_start"
    out.mkdir()
    cold_start.run(ColdStartConfig(sources=sources), {}, out)
    return chat_rows(out / "sft.parquet")


@pytest.fixture(scope="module")
def real_rows(shared_data, tmp_path_factory):
    sources = [ColdStartSource(source=s, location=str(shared_data / "samples" / f)) for s, f in SAMPLES.items()]
    return _cold_start(tmp_path_factory.mktemp("real"), sources)


@pytest.fixture(scope="module")
def synthetic_rows(tmp_path_factory):
    return _cold_start(tmp_path_factory.mktemp("syn"), [ColdStartSource(source="synthetic", examples=40)])


@pytest.fixture(scope="module", params=["small", "qwen3"])
def tok(request, tiny_assets):
    path = tiny_assets.tokenizer if request.param == "small" else tiny_assets.real_tokenizer
    return training_tokenizer(path)


def _loss_spans(tok, row) -> list[str]:
    out = tok.apply_chat_template(row["messages"], tools=json.loads(row["tools"]), tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    spans, current = [], []
    for token, m in zip(out["input_ids"], out["assistant_masks"], strict=True):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return [tok.decode(s, skip_special_tokens=False) for s in spans]


def _check_loss_is_assistant_only(tok, row) -> None:
    text = tok.apply_chat_template(row["messages"], tools=json.loads(row["tools"]), tokenize=False)
    expected = ASSISTANT_TURN.findall(text)  # what each assistant turn renders, end-of-turn included
    spans = _loss_spans(tok, row)
    assert spans == expected, row["id"]
    assistant = [m for m in row["messages"] if m["role"] == "assistant"]
    assert len(spans) == len(assistant)
    for span, m in zip(spans, assistant, strict=True):
        assert m["content"].strip() in span
        for call in m["tool_calls"] or ():
            assert call["function"]["arguments"] in span  # tool calls carry loss
    loss_text = "".join(spans)
    for m in row["messages"]:
        if m["role"] in ("system", "user", "tool") and len(m["content"].strip()) > 12:
            assert m["content"].strip() not in loss_text, (row["id"], m["role"])
    assert "<tool_response>" not in loss_text and "<|im_start|>" not in loss_text


def test_loss_tokens_are_exactly_the_assistant_turns_on_real_conversations(tok, real_rows):
    assert {r["id"].split("-")[0] for r in real_rows} and len(real_rows) >= 10
    assert any(m.get("tool_calls") for r in real_rows for m in r["messages"])
    assert any(m["role"] == "tool" for r in real_rows for m in r["messages"])
    for row in real_rows:
        _check_loss_is_assistant_only(tok, row)


def test_loss_tokens_on_synthetic_demonstrations_with_failed_calls(tok, synthetic_rows):
    assert any(sum(m["role"] == "tool" for m in r["messages"]) >= 2 for r in synthetic_rows)
    for row in synthetic_rows:
        _check_loss_is_assistant_only(tok, row)


def test_template_renders_like_qwen3_but_keeps_earlier_think_blocks(tok, real_rows, synthetic_rows):
    original = qwen3_templates()["default"]
    for row in [*real_rows, *synthetic_rows]:
        tools = json.loads(row["tools"]) or None
        ours = tok.apply_chat_template(row["messages"], tools=tools, tokenize=False)
        theirs = tok.apply_chat_template(row["messages"], tools=tools, tokenize=False, chat_template=original)
        assert ours.replace(EMPTY_THINK, "") == theirs.replace(EMPTY_THINK, ""), row["id"]
        if sum(m["role"] == "assistant" for m in row["messages"]) == 1:
            assert ours == theirs, row["id"]


def test_sft_tokens_equal_the_rollout_token_stream(tok, synthetic_rows):
    """The rollout appends each generated turn and the rendered feedback; SFT must train on
    that very sequence, so the model starts each turn the way it will be asked to."""
    fmt = ChatFormat(tok)
    end = fmt.end_of_turn_id
    for row in synthetic_rows:
        messages = row["messages"]
        assert json.loads(row["tools"]) == fmt.tools and messages[0]["content"] == fmt.system_prompt
        stream = fmt.prompt_ids(messages[1]["content"])
        assistant_spans = _loss_spans(tok, row)
        turn = 0
        for k, m in enumerate(messages[2:], start=2):
            if m["role"] == "assistant":
                generated = assistant_spans[turn].removesuffix("<|im_end|>\n")  # what the model writes
                stream += fmt.encode(generated) + [end]
                turn += 1
            elif m["role"] == "tool" and messages[k - 1]["role"] != "tool":
                feedback = [x["content"] for x in messages[k:] if x["role"] == "tool"][: len(
                    messages[k - 1]["tool_calls"] or [])]
                stream += fmt.feedback_ids(feedback)
        sft = tok.apply_chat_template(messages, tools=json.loads(row["tools"]), tokenize=True, return_dict=True)
        assert sft["input_ids"][: len(stream)] == stream, row["id"]
        assert tok.decode(sft["input_ids"][len(stream):]) == "\n"  # the template's newline after the last turn


def test_malformed_rows_fail_naming_row_and_field(tmp_path, synthetic_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "sft.parquet"
    messages = [{"role": "user", "content": "q", "tool_calls": None},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]
    pq.write_table(pa.Table.from_pylist([{"id": "x-1", "source": "s", "messages": messages, "tools": "[]"}]), bad)
    with pytest.raises(SFTDataError, match=r"sft.parquet row 0 \(id 'x-1'\) messages\[1\]: tool_calls\[0\]"):
        chat_rows(bad)


def test_a_tokenizer_without_the_protocol_tokens_is_refused(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="a").save_pretrained(tmp_path / "tok")
    assert AutoTokenizer.from_pretrained(tmp_path / "tok")
    with pytest.raises(SFTDataError, match="has no '<|im_start|>'"):
        training_tokenizer(str(tmp_path / "tok"))


@pytest.mark.parametrize(("micro", "procs", "accum"), [(1, 1, 128), (4, 2, 16), (8, 8, 2), (16, 8, 1)])
def test_batch_plan_makes_the_global_batch(micro, procs, accum):
    plan = BatchPlan.make(128, micro, procs)
    assert plan.accumulation == accum and plan.micro_batch_per_device * plan.processes * plan.accumulation == 128


def test_batch_plan_refuses_what_cannot_make_the_global_batch():
    with pytest.raises(BatchPlanError,
                       match=r"128 is not a multiple of .*\(3\) x processes \(2\) = 6.*one of \[1, 2, 4"):
        BatchPlan.make(128, 3, 2)
    with pytest.raises(BatchPlanError, match="cannot be split over 3 processes"):
        BatchPlan.make(128, 1, 3)


def test_truncation_is_measured_with_and_without_packing(tiny_assets, synthetic_rows, tmp_path):
    """TRL cuts conversations to max_length without a word (and, packed, does not even drop the
    emptied ones): the stage measures what is lost, refuses a cut that leaves nothing, and says so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from configs.schema import SFTConfig
    from training.sft import build_trainer
    from training.sft_data import chat_rows, training_tokenizer, truncation

    parquet = tmp_path / "sft.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": r["id"], "source": "synthetic", "messages": r["messages"],
                                          "tools": r["tools"]} for r in synthetic_rows[:8]]), parquet)
    tokenizer = training_tokenizer(tiny_assets.tokenizer)
    rows = chat_rows(parquet)
    lengths = [len(tokenizer.apply_chat_template(r["messages"], tools=json.loads(r["tools"]) or None, tokenize=True,
                                                 return_dict=True)["input_ids"]) for r in rows]
    for packing in (False, True):
        cfg = SFTConfig(global_batch_size=4, micro_batch_per_device=4, max_seq_tokens=32, packing=packing)
        with pytest.raises(SFTDataError, match=r"all 8 conversations lost every assistant token .*max_seq_tokens=32"):
            build_trainer(cfg, tiny_assets.model, tiny_assets.tokenizer, parquet, tmp_path / "t", tmp_path)
    inside = min(lengths) - 3  # cuts every one inside its last assistant turn
    cut = truncation(rows, tokenizer, inside)
    assert cut.truncated == 8
    assert 0 < cut.assistant_tokens_lost < cut.assistant_tokens and cut.emptied == 0
    assert 0 < cut.metrics()["assistant_tokens_lost_to_truncation"] < 1
    ok = build_trainer(SFTConfig(global_batch_size=4, micro_batch_per_device=4, max_seq_tokens=2048, packing=True),
                       tiny_assets.model, tiny_assets.tokenizer, parquet, tmp_path / "t2", tmp_path)
    assert ok.truncation.metrics() == {"conversations_truncated": 0, "conversations_without_assistant_tokens": 0,
                                       "assistant_tokens_lost_to_truncation": 0.0}
