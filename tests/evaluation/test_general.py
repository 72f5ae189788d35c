"""lm-eval through its Python API on the tiny model: IFEval from the local copy, and a task
whose data cannot be reached reported as unavailable while the others complete."""

from __future__ import annotations

from configs.eval import LMEvalConfig, LMEvalTask
from evaluation.general import run_general_tasks


def test_ifeval_from_local_data_and_an_unreachable_task(tiny_assets, shared_data, tmp_path):
    cfg = LMEvalConfig(limit=3, max_gen_toks=8, batch_size=3, tasks=[
        LMEvalTask(name="gsm8k"),  # hub only: unreachable here
        LMEvalTask(name="ifeval", data=str(shared_data / "benchmarks" / "ifeval.jsonl")),
        LMEvalTask(name="no_such_task_anywhere", data=str(tmp_path / "x.jsonl")),
    ])
    out = run_general_tasks(cfg, tiny_assets.model, tiny_assets.tokenizer)
    assert out["gsm8k"]["status"] == "unavailable" and out["gsm8k"]["reason"]
    assert out["no_such_task_anywhere_local"]["status"] == "unavailable"
    ifeval = out["ifeval_local"]
    assert ifeval["status"] == "ok", ifeval
    assert ifeval["documents"] == 3
    assert set(ifeval["metrics"]) >= {"prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc"}
    assert all(0.0 <= v <= 1.0 for k, v in ifeval["metrics"].items() if "stderr" not in k)


def test_no_tasks_costs_nothing(tiny_assets):
    assert run_general_tasks(LMEvalConfig(), "/does/not/matter", "/nor/this") == {}
