"""Config schema, YAML loading, dotted overrides and their error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from accelerate.commands.config.config_args import ClusterConfig

from configs.load import ConfigError, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
PIPELINE_YAMLS = sorted(p for p in CONFIGS.rglob("*.yaml") if "accelerate" not in p.parts)


def test_every_yaml_under_configs_is_checked():
    all_yamls = sorted(CONFIGS.rglob("*.yaml"))
    accelerate = [p for p in all_yamls if "accelerate" in p.parts]
    assert set(all_yamls) == set(PIPELINE_YAMLS) | set(accelerate)
    assert {p.name for p in PIPELINE_YAMLS} >= {"tiny.yaml", "rstar2_agent_14b.yaml"}


@pytest.mark.parametrize("path", PIPELINE_YAMLS, ids=lambda p: p.name)
def test_pipeline_yaml_validates(path):
    cfg = load_config(path)
    assert cfg.rl.kept_per_prompt <= cfg.rl.rollouts_per_prompt


@pytest.mark.parametrize("path", sorted((CONFIGS / "accelerate").rglob("*.yaml")), ids=lambda p: p.name)
def test_accelerate_yaml_validates(path):
    cluster = ClusterConfig.from_yaml_file(str(path))
    assert cluster.distributed_type.value == "DEEPSPEED"
    ds_file = CONFIGS.parent / yaml.safe_load(path.read_text())["deepspeed_config"]["deepspeed_config_file"]
    ds = json.loads(ds_file.read_text())
    assert ds["zero_optimization"]["stage"] == 3
    assert "train_batch_size" not in ds  # NOTES.md: "auto" computed a wrong value
    assert cluster.num_processes == cluster.num_machines * 8


def test_paper_numbers():
    """SPEC §6-9, carried by configs/rstar2_agent_14b.yaml."""
    c = load_config(CONFIGS / "rstar2_agent_14b.yaml")
    assert c.model.base == "Qwen/Qwen3-14B-Base"
    assert (c.sft.lr, c.sft.global_batch_size, c.sft.warmup_ratio, c.sft.epochs) == (5e-6, 128, 0.04, 3)
    assert (c.rl.lr, c.rl.warmup_steps, c.rl.weight_decay, c.rl.grad_clip) == (1e-6, 20, 0.01, 1.0)
    assert (c.rl.prompts_per_step, c.rl.rollouts_per_prompt, c.rl.kept_per_prompt) == (512, 32, 16)
    assert (c.rl.clip_low, c.rl.clip_high, c.rl.temperature) == (0.2, 0.28, 1.0)
    stages = [c.rl.stage1, c.rl.stage2, c.rl.stage3]
    assert [s.max_response_tokens for s in stages] == [8192, 12288, 12288]
    assert [s.max_turns for s in stages] == [10, 10, 15]
    assert [s.steps for s in stages] == [300, 85, 125]
    assert (c.rl.stage3_filter.rollouts_per_problem, c.rl.stage3_filter.drop_when_solved) == (8, 8)
    assert (c.eval.samples_per_problem, c.eval.temperature) == (16, 0.6)
    assert (c.eval.max_response_tokens, c.eval.max_turns) == (30000, 30)
    assert c.hardware.gpus_per_node * c.hardware.nodes == 64
    counts = {s.source: s.examples for s in c.data.cold_start.sources}  # SPEC §8 mixture
    assert counts["toolace"] + counts["apigen_mt"] + counts["glaive_fc_v2"] == 117_000
    assert counts["magicoder_oss"] + counts["magicoder_evol"] == 48_000
    assert (counts["tulu3"], counts["nemotron_chat"]) == (30_000, 27_000)
    agree = c.data.rl_curation.agreement
    assert (agree.model, agree.samples_per_problem, agree.min_agreeing) == ("Qwen/Qwen3-32B", 16, 2)
    assert c.data.decontaminate.ngram_words == 8


def test_dotted_override_sets_nested_value():
    c = load_config(CONFIGS / "tiny.yaml", ["rl.stage1.steps=5", "rl.roc.selection=topk", "sandbox.urls=[a, b]"])
    assert c.rl.stage1.steps == 5 and c.rl.roc.selection == "topk" and c.sandbox.urls == ["a", "b"]


def test_unknown_key_names_key_and_allowed_keys():
    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "tiny.yaml", ["rl.stage1.stepz=5"])
    msg = str(e.value)
    assert "rl.stage1.stepz" in msg and "max_turns" in msg and "steps" in msg


def test_bad_literal_lists_allowed_values():
    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "tiny.yaml", ["rl.algorithm=ppo"])
    msg = str(e.value)
    assert "rl.algorithm" in msg and "'grpo_roc'" in msg and "'prof'" in msg and "ppo" in msg


def test_bad_type_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rl:\n  stage1:\n    steps: many\n  kept_per_prompt: 64\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert str(bad) in str(e.value) and "rl.stage1.steps" in str(e.value)


def test_unknown_yaml_section_is_rejected(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer:\n  lr: 1\n")
    with pytest.raises(ConfigError, match=r"trainer: unknown key; allowed keys here: run, hardware"):
        load_config(bad)


def test_kept_must_fit_rollouts():
    with pytest.raises(ConfigError, match="kept_per_prompt"):
        load_config(CONFIGS / "tiny.yaml", ["rl.kept_per_prompt=99"])


def test_malformed_override():
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(CONFIGS / "tiny.yaml", ["rl.lr"])


def test_zero3_json_passes_deepspeeds_own_validation(monkeypatch):
    pytest.importorskip("deepspeed", reason="DeepSpeed is installed by `make setup` (cluster extra)")
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    from deepspeed.runtime.config import DeepSpeedConfig

    ds = json.loads((CONFIGS / "accelerate" / "zero3.json").read_text())
    # accelerate fills the "auto" values from the training arguments; do the same here
    ds.update(gradient_accumulation_steps=4, gradient_clipping=1.0, train_micro_batch_size_per_gpu=1)
    zero = ds["zero_optimization"]
    zero.update({k: 1_000_000 for k, v in zero.items() if v == "auto"})
    parsed = DeepSpeedConfig(ds)
    assert parsed.zero_optimization_stage == 3 and parsed.gradient_clipping == 1.0
    zero["stagee"] = 3  # a typo must be rejected, not ignored
    with pytest.raises(Exception, match="stagee"):
        DeepSpeedConfig(ds)


def test_a_yaml_can_start_from_a_base_and_change_numbers_only(tmp_path):
    (tmp_path / "base.yaml").write_text("rl:\n  lr: 1.0e-6\n  stage1: {steps: 300, max_turns: 10}\n"
                                        "eval: {pass_k: [1, 4, 8]}\n")
    (tmp_path / "over.yaml").write_text("base: base.yaml\nrl:\n  stage1: {steps: 2}\neval: {pass_k: [1]}\n")
    c = load_config(tmp_path / "over.yaml", ["rl.stage1.max_turns=3"])
    assert (c.rl.lr, c.rl.stage1.steps, c.rl.stage1.max_turns, c.eval.pass_k) == (1e-6, 2, 3, [1])


def test_a_base_chain_that_goes_round_or_is_missing_is_named(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="circle"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="nowhere.yaml does not exist .the base of"):
        load_config(tmp_path / "c.yaml")


@pytest.mark.parametrize(("text", "line", "key", "first"), [
    ("rl:\n  lr: 1.0e-6\nsft:\n  lr: 5.0e-6\nrl:\n  steps: 3\n", 5, "rl", 1),  # a section written twice
    ("rl:\n  lr: 1.0e-6\n  warmup_steps: 2\n  lr: 2.0e-6\n", 4, "lr", 2),  # a key inside a section
    ("rl: {lr: 1.0e-6, lr: 2.0e-6}\n", 1, "lr", 1),  # a flow mapping
    ("eval:\n  benchmarks:\n    - {name: a, location: x.jsonl}\n    - name: b\n      name: c\n", 5, "name", 4),
])
def test_a_key_written_twice_names_the_file_the_line_and_the_key(tmp_path, text, line, key, first):
    """yaml.safe_load would keep the last value without a word."""
    cfg = tmp_path / "dup.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=rf"dup\.yaml, line {line}: duplicate key '{key}' \(first on line {first}\)"):
        load_config(cfg)


def test_yaml_syntax_and_override_errors_name_their_source(tmp_path):
    cfg = tmp_path / "broken.yaml"
    cfg.write_text("rl:\n  lr: [1, 2\nsft: {}\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml, line 3, column \d+: not valid YAML"):
        load_config(cfg)
    with pytest.raises(ConfigError, match=r"tiny\.yaml --set eval.lm_eval=.*duplicate key 'limit'"):
        load_config("configs/tiny.yaml", ["eval.lm_eval={limit: 1, limit: 2}"])
    base = tmp_path / "base.yaml"
    base.write_text("sft:\n  epochs: 1\n  epochs: 2\n")
    (tmp_path / "over.yaml").write_text("base: base.yaml\nsft: {lr: 1.0e-5}\n")
    with pytest.raises(ConfigError, match=r"base\.yaml, line 3: duplicate key 'epochs'"):
        load_config(tmp_path / "over.yaml")
