"""The cold-start conversations as SFT reads them, and the chat template it trains with (SPEC §2, §7).

`chat_rows` turns `sft.parquet` (datalib/tables.py) into TRL's conversational form:
`messages` with structured `tool_calls` and `tools`. Arguments and tools stay JSON text
(checked to parse): Qwen3's template writes string arguments verbatim, TRL decodes a
`tools` string, and Arrow would otherwise merge the argument objects of different tools
into one struct, adding `null` keys that the template would render.

`training_tokenizer` loads any tokenizer (the tiny one, or a hub id) and gives it the
project's training chat template: Qwen3's template with `{% generation %}` markers, the
prefix-preserving variant TRL ships. It renders like Qwen3's own template except that an
earlier assistant turn keeps its empty `<think>\\n\\n</think>\\n\\n` block, which Qwen3's
template drops when it re-renders history. The rollout never re-renders history (each
turn's tokens are appended as generated), so this is the rendering whose tokens equal the
rollout's token stream for the same conversation (tests/training/test_sft_data.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from rollout.chat_template import qwen3_templates
from stagekit.errors import StageInputError


class SFTDataError(StageInputError):
    pass


def chat_message(m: dict, where: str) -> dict:
    out = {"role": m["role"], "content": m.get("content") or ""}
    calls = []
    for k, call in enumerate(m.get("tool_calls") or []):
        fn = call["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"], ensure_ascii=False)
        try:
            if not isinstance(json.loads(args), dict):
                raise SFTDataError(f"{where}: tool_calls[{k}].function.arguments is not a JSON object")
        except json.JSONDecodeError as e:
            raise SFTDataError(f"{where}: tool_calls[{k}].function.arguments is not JSON ({e})") from None
        calls.append({"type": "function", "function": {"name": fn["name"], "arguments": args}})
    out["tool_calls"] = calls or None
    return out


def chat_rows(path: Path) -> list[dict]:
    """Every row of `sft.parquet` as {id, messages, tools}; a malformed row fails naming it."""
    rows = []
    for i, row in enumerate(pq.read_table(path).to_pylist()):
        where = f"{path} row {i} (id {row.get('id')!r})"
        tools = row.get("tools") or "[]"
        try:
            if not isinstance(json.loads(tools), list):
                raise SFTDataError(f"{where}: field `tools` is not a JSON list")
        except json.JSONDecodeError as e:
            raise SFTDataError(f"{where}: field `tools` is not JSON ({e})") from None
        messages = [chat_message(m, f"{where} messages[{j}]") for j, m in enumerate(row["messages"])]
        if not any(m["role"] == "assistant" for m in messages):
            raise SFTDataError(f"{where}: no assistant turn, nothing to train on")
        rows.append({"id": row["id"], "messages": messages, "tools": tools})
    return rows


def training_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    for token in ("<|im_start|>", "<|im_end|>", "<tool_call>", "<tool_response>"):
        if token not in tokenizer.get_vocab():
            raise SFTDataError(f"tokenizer {name_or_path} has no {token!r}: the project's chat template "
                               "(Qwen3's) cannot be rendered with it")
    tokenizer.chat_template = qwen3_templates()["training"]
    if tokenizer.pad_token is None:
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in tokenizer.get_vocab() else tokenizer.eos_token
    return tokenizer


@dataclass(frozen=True)
class Truncation:
    """What cutting every conversation to `max_tokens` costs, measured with the training template."""

    max_tokens: int
    conversations: int
    truncated: int  # longer than max_tokens
    emptied: int  # no assistant token left within max_tokens
    assistant_tokens: int
    assistant_tokens_lost: int

    def metrics(self) -> dict[str, float]:
        lost = self.assistant_tokens_lost / self.assistant_tokens if self.assistant_tokens else 0.0
        return {"conversations_truncated": self.truncated, "conversations_without_assistant_tokens": self.emptied,
                "assistant_tokens_lost_to_truncation": round(lost, 4)}


def truncation(rows: list[dict], tokenizer: PreTrainedTokenizerBase, max_tokens: int) -> Truncation:
    """Measure truncation before TRL applies it: TRL cuts each conversation (or, packed, each
    sequence) to `max_length` without a word, and only without packing drops the emptied ones."""
    truncated = emptied = total = lost = 0
    for row in rows:
        out = tokenizer.apply_chat_template(row["messages"], tools=json.loads(row["tools"]) or None, tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True)
        mask = out["assistant_masks"]
        kept = sum(mask[:max_tokens])
        truncated += len(mask) > max_tokens
        emptied += kept == 0
        total += sum(mask)
        lost += sum(mask) - kept
    return Truncation(max_tokens, len(rows), truncated, emptied, total, lost)
