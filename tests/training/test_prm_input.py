"""What PROF's PRM reads (issue 25, point 1): the model's text without the chat template's
special tokens. The policy's turns are decoded with them kept (rollout/prompt.py: tags and
turn markers are part of the protocol), so each turn ends in `<|im_end|>`; inside the PRM's
assistant turn that token reads as an end of turn and changes its scores. Checked with the
real Qwen3 vocabulary, where `<|im_end|>` is one special token."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from training.prm import ProcessRewardModel, prm_response, split_steps
from training.tiny_prm import build_tiny_prm


@pytest.fixture(scope="module")
def qwen3(tiny_assets):
    return AutoTokenizer.from_pretrained(tiny_assets.real_tokenizer)


@pytest.fixture(scope="module")
def prm(tiny_assets, tmp_path_factory) -> ProcessRewardModel:
    path = build_tiny_prm(tmp_path_factory.mktemp("prm_qwen3"), seed=0, tokenizer_dir=Path(tiny_assets.real_tokenizer))
    return ProcessRewardModel.from_pretrained(str(path))


TURNS = ["<think>\nLet me compute it.\n</think>\n\nFirst add the numbers.\n\n<tool_call>\n{\"name\": \"python\"}"
         "\n</tool_call><|im_end|>",
         "The program printed 42.\n\n<answer>The answer is \\boxed{42}.</answer><|im_end|><|endoftext|>"]


def test_the_policys_special_tokens_are_not_in_the_prm_response(qwen3):
    text = prm_response("".join(TURNS), qwen3.all_special_tokens)
    assert "<|im_end|>" not in text and "<|endoftext|>" not in text
    assert "<tool_call>" in text and "<think>" in text  # the model's own tags stay: they are its text
    assert split_steps(text)[-1] == "<answer>The answer is \\boxed{42}.</answer>"


def test_an_end_of_turn_token_in_a_response_changes_nothing_the_prm_reads(prm, qwen3):
    im_end = qwen3.convert_tokens_to_ids("<|im_end|>")
    clean = "First add the numbers.\n\nThe program printed 42.\n\nThe answer is 42."
    dirty = "First add the numbers.<|im_end|>\n\nThe program printed 42.<|im_end|>\n\nThe answer is 42.<|im_end|>"
    ids = prm.encode("What is 6 * 7?", split_steps(dirty))
    assert ids == prm.encode("What is 6 * 7?", split_steps(clean))
    assert ids.count(im_end) == 3  # the template's own: system, user and assistant turns
    assert prm.step_scores(["What is 6 * 7?"], [dirty]) == prm.step_scores(["What is 6 * 7?"], [clean])
