"""The offline tokenizers and the tiny model (issue 2, point 3)."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from assets.special_tokens import QWEN3_ADDED_TOKENS

TOOLS = [{"type": "function", "function": {
    "name": "execute_python_code_with_standard_io",
    "description": "Run Python.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}}]


def test_real_qwen3_tokenizer_known_ids(tiny_assets):
    tok = AutoTokenizer.from_pretrained(tiny_assets.real_tokenizer)
    assert tok("Hello world")["input_ids"] == [9707, 1879]
    assert tok.convert_tokens_to_ids("<|im_start|>") == 151644
    assert tok.convert_tokens_to_ids("<|im_end|>") == 151645
    assert tok.convert_tokens_to_ids("<|endoftext|>") == 151643
    assert tok.convert_tokens_to_ids("<tool_call>") == 151657
    assert tok.convert_tokens_to_ids("</tool_call>") == 151658
    assert tok.convert_tokens_to_ids("<tool_response>") == 151665
    assert tok.convert_tokens_to_ids("</tool_response>") == 151666
    assert tok.convert_tokens_to_ids("<think>") == 151667
    assert tok.convert_tokens_to_ids("</think>") == 151668
    assert len(tok) == 151669
    # Qwen splits digits one by one
    assert len(tok("12345")["input_ids"]) == 5


def test_real_tokenizer_round_trips_chat(tiny_assets):
    tok = AutoTokenizer.from_pretrained(tiny_assets.real_tokenizer)
    text = tok.apply_chat_template([{"role": "user", "content": "Compute 2+2, héllo ∑ 😀"}], tools=TOOLS,
                                   tokenize=False, add_generation_prompt=True)
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert ids[0] == 151644 and "# Tools" in text and "<tools>" in text


def test_small_tokenizer(tiny_assets):
    tok = AutoTokenizer.from_pretrained(tiny_assets.tokenizer)
    assert 3500 <= len(tok) <= 4096
    for name, _special in QWEN3_ADDED_TOKENS:
        ids = tok(name, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, name  # each added token is one id
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    msgs = [{"role": "system", "content": "Reason in <reason></reason>."},
            {"role": "user", "content": "What is 12345 * 678?"}]
    text = tok.apply_chat_template(msgs, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok(text)["input_ids"]) == text
    assert "training" in tok.chat_template  # named template for assistant-only SFT loss


def test_tiny_model_is_a_few_hundred_thousand_params_and_runs(tiny_assets):
    model = AutoModelForCausalLM.from_pretrained(tiny_assets.model)
    n = sum(p.numel() for p in model.parameters())
    assert 100_000 <= n <= 1_000_000
    assert type(model).__name__ == "Qwen3ForCausalLM"
    ids = torch.tensor([[1, 2, 3, 4]])
    out = model(input_ids=ids)
    assert out.logits.shape == (1, 4, model.config.vocab_size)
    assert torch.isfinite(out.logits).all()
