"""PROF's PRM scoring (training/prm.py) on the tiny PRM built offline (training/tiny_prm.py)."""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import statistics
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from training.prm import PRM_SYSTEM_PROMPT, STEP_SEPARATOR, ProcessRewardModel, split_steps
from training.tiny_prm import build_tiny_prm

WORDS = "let x be the sum of all 3 7 12 numbers so we compute then print answer boxed".split()


@pytest.fixture(scope="module")
def prm_dir(tiny_assets, tmp_path_factory) -> Path:
    return build_tiny_prm(tmp_path_factory.mktemp("tiny_prm"), seed=0, tokenizer_dir=Path(tiny_assets.tokenizer))


@pytest.fixture(scope="module")
def prm(prm_dir) -> ProcessRewardModel:
    return ProcessRewardModel.from_pretrained(str(prm_dir))


def random_responses(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    step = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 20)))  # noqa: E731
    return ["\n\n".join(step() for _ in range(rng.randint(1, 9))) for _ in range(n)]


def reference_scores(prm: ProcessRewardModel, problem: str, steps: list[str]) -> list[float]:
    """The model card's procedure, one unpadded conversation at a time."""
    messages = [
        {"role": "system", "content": PRM_SYSTEM_PROMPT},
        {"role": "user", "content": problem},
        {"role": "assistant", "content": STEP_SEPARATOR.join(steps) + STEP_SEPARATOR},
    ]
    text = prm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    input_ids = torch.tensor([prm.tokenizer.encode(text)])
    with torch.no_grad():
        probs = torch.softmax(prm.model(input_ids), dim=-1)
    mask = input_ids == prm.tokenizer.convert_tokens_to_ids(STEP_SEPARATOR)
    return probs[0][mask[0]][:, 1].tolist()


def test_steps_split_on_blank_lines():
    assert split_steps("a\n\nb") == ["a", "b"]
    assert split_steps("a\n\n\n\nb\n\n\nc") == ["a", "b", "c"]
    assert split_steps("a\n  \t\nb") == ["a", "b"]  # a line of spaces is blank
    assert split_steps("a\r\n\r\nb") == ["a", "b"]
    assert split_steps("one\ntwo\n\nthree") == ["one\ntwo", "three"]  # one newline is no boundary
    assert split_steps("\n\n  lead and trail  \n\n\n   x = 1\n\n") == ["lead and trail", "x = 1"]
    assert split_steps("") == [] and split_steps(" \n\n \n") == []
    assert split_steps(f"a{STEP_SEPARATOR}b\n\n{STEP_SEPARATOR}\n\nc") == ["ab", "c"]


def test_separators_mark_exactly_the_steps(prm):
    response = (
        'Let x = 3.\n\n<tool_call>\n{"name": "python", "arguments": {"code": "print(2*3)"}}\n</tool_call>'
        "\n\n  So 2x = 6, √36 = 6 — done.  \n\n\n"
        f"tricky {STEP_SEPARATOR}separator\n\n<answer>\\boxed{{6}}</answer>"
    )
    steps = split_steps(response)
    ids = prm.encode("What is 2*3?", steps)
    at = [i for i, t in enumerate(ids) if t == prm.separator_id]
    assert len(at) == len(steps) == 5
    assert prm.tokenizer.decode(ids[: at[0]]).endswith("<|im_start|>assistant\n" + steps[0])
    for k in range(1, len(steps)):
        assert prm.tokenizer.decode(ids[at[k - 1] + 1 : at[k]]) == steps[k]
    assert prm.tokenizer.decode(ids[at[-1] + 1 :]) == "<|im_end|>\n"


def test_scores_match_the_model_card_procedure(prm):
    responses = random_responses(6, seed=1)
    got = prm.step_scores([f"Problem {i}" for i in range(6)], responses, batch_size=4)
    for i, response in enumerate(responses):
        assert got[i] == pytest.approx(reference_scores(prm, f"Problem {i}", split_steps(response)), abs=1e-6)


def test_batching_and_padding_do_not_change_scores(prm):
    responses = random_responses(12, seed=2)
    problems = [f"Compute item {i}." for i in range(12)]
    alone = [prm.step_scores([p], [r], batch_size=1)[0] for p, r in zip(problems, responses, strict=True)]
    lengths = {len(prm.encode(p, split_steps(r))) for p, r in zip(problems, responses, strict=True)}
    assert len(lengths) > 6  # rows of many lengths: the batch is really padded
    for batch_size in (3, 5, 12):
        together = prm.step_scores(problems, responses, batch_size=batch_size)
        for a, b in zip(alone, together, strict=True):
            assert b == pytest.approx(a, abs=1e-5)
    flat = [s for row in alone for s in row]
    assert statistics.pstdev(flat) > 0.05  # the scores differ, so a misplaced position would show


def test_one_score_per_step_in_open_unit_interval(prm):
    responses = random_responses(10, seed=3) + ["", "  \n\n \n", "single step, no blank line"]
    scores = prm.step_scores(["p"] * len(responses), responses, batch_size=4)
    for response, row in zip(responses, scores, strict=True):
        assert len(row) == len(split_steps(response))
        assert all(0.0 < s < 1.0 for s in row)
    assert scores[-3] == [] and scores[-2] == [] and len(scores[-1]) == 1
    assert prm.step_scores([], [], batch_size=4) == []
    with pytest.raises(ValueError, match="2 problems for 1 responses"):
        prm.step_scores(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        prm.step_scores(["a"], ["x"], batch_size=0)


def test_separator_in_problem_text_is_not_scored(prm):
    response = "step one\n\nstep two"
    plain = prm.step_scores(["What is 1+1?"], [response])[0]
    assert prm.step_scores([f"What is 1+1?{STEP_SEPARATOR}"], [response])[0] == pytest.approx(plain, abs=1e-6)


def test_overlong_input_scores_its_prefix_and_nan_past_the_limit(prm_dir, prm, caplog):
    long_response = "\n\n".join(f"step {i}: we add {i} and {i + 1} to get {2 * i + 1}" for i in range(40))
    full = prm.step_scores(["Sum them."], [long_response])[0]
    n_tokens = len(prm.encode("Sum them.", split_steps(long_response)))
    limit = n_tokens // 2
    short = ProcessRewardModel.from_pretrained(str(prm_dir), max_length=limit)
    with caplog.at_level(logging.WARNING, logger="training.prm"):
        cut = short.step_scores(["Sum them.", "Other."], [long_response, "fits\n\neasily"])
    assert "exceed max_length" in caplog.text
    scored = [s for s in cut[0] if not math.isnan(s)]
    assert len(cut[0]) == 40 and 0 < len(scored) < 40
    assert all(math.isnan(s) for s in cut[0][len(scored) :])
    assert scored == pytest.approx(full[: len(scored)], abs=1e-5)  # causal: the prefix is exact
    assert cut[1] == pytest.approx(prm.step_scores(["Other."], ["fits\n\neasily"])[0], abs=1e-5)
    strict = ProcessRewardModel.from_pretrained(str(prm_dir), max_length=limit, overflow="error")
    with pytest.raises(ValueError, match=f"exceed max_length={limit}"):
        strict.step_scores(["Sum them."], [long_response])


def test_tiny_prm_round_trips_through_from_pretrained(prm_dir, prm):
    saved = load_file(str(prm_dir / "model.safetensors"))
    loaded = prm.model.state_dict()
    assert set(saved) == set(loaded)
    assert {"score.0.weight", "score.0.bias", "score.2.weight", "score.2.bias"} <= set(saved)
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
    assert prm.model.config.architectures == ["Qwen2ForProcessRewardModel"]
    assert prm.model.config.model_type == "qwen2"
    again = build_tiny_prm(prm_dir.parent / "again", seed=0, tokenizer_dir=prm_dir)
    assert torch.equal(load_file(str(again / "model.safetensors"))["score.2.weight"], saved["score.2.weight"])


def test_hub_layout_loads_without_running_its_remote_code(prm_dir, prm, tmp_path):
    """The hub config names `modeling_qwen2_rm.py` for trust_remote_code; we never import it."""
    shutil.copytree(prm_dir, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
        "AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    for module in ("configuration_qwen2_rm.py", "modeling_qwen2_rm.py"):
        (tmp_path / module).write_text("raise RuntimeError('remote code ran')\n")
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights["lm_head.weight"] = torch.zeros(config["vocab_size"], config["hidden_size"])  # some exports keep it
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    hub_like = ProcessRewardModel.from_pretrained(str(tmp_path), dtype=torch.float32)
    response = "a\n\nb\n\nc"
    assert hub_like.step_scores(["p"], [response]) == prm.step_scores(["p"], [response])


def test_checkpoint_without_the_head_is_refused(prm_dir, tmp_path):
    config = Qwen2Config.from_pretrained(prm_dir)
    Qwen2ForCausalLM(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(prm_dir).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="not a Qwen2 PRM checkpoint, weights missing: \\['score"):
        ProcessRewardModel.from_pretrained(str(tmp_path))


def test_tokenizer_without_separator_is_a_clear_error(prm_dir, tiny_assets, tmp_path):
    for name in ("config.json", "model.safetensors"):
        shutil.copy(prm_dir / name, tmp_path / name)
    AutoTokenizer.from_pretrained(tiny_assets.tokenizer).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"tokenizer '{tmp_path}' has no <extra_0> token"):
        ProcessRewardModel.from_pretrained(str(tmp_path))
