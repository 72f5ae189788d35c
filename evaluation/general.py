"""General abilities through lm-eval's Python API (SPEC §9), on the checkpoint being evaluated.

A task with `data` set reads that local file instead of the hub: its own YAML config is
loaded (prompts, generation settings, scorer) and only the dataset is swapped for a
`json`/`parquet` one, under the name `<task>_local` (NOTES.md, "lm-eval offline"). A task
that cannot run (its data unreachable, a resource missing) is reported with the reason,
and the other tasks and the rest of the evaluation go on.
IFEval scores with NLTK's `punkt_tab`; `make setup` puts it in `.venv/nltk_data`, which is
used when NLTK_DATA is not set.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

from configs.eval import LMEvalConfig, LMEvalTask
from stagekit.paths import resolve_local

log = logging.getLogger(__name__)

NLTK_DIR = Path(sys.prefix) / "nltk_data"
_NEEDS_PUNKT = ("ifeval",)


def _task_spec(task: LMEvalTask, manager) -> str | dict:
    if task.data is None:
        return task.name
    from lm_eval.tasks._yaml_loader import load_yaml  # resolves `!function` and `include` (lm-eval 0.4.13)

    entry = manager.task_index.get(task.name)
    if entry is None or entry.yaml_path is None:
        raise KeyError(f"lm-eval has no task {task.name!r} with a YAML config")
    path = resolve_local(task.data)
    if not path.exists():
        raise FileNotFoundError(f"local data {task.data} ({path}) does not exist")
    config = load_yaml(entry.yaml_path, resolve_func=True)
    split = task.split or config.get("test_split") or "test"
    config.update(
        task=f"{task.name}_local", dataset_path="parquet" if path.suffix == ".parquet" else "json",
        dataset_name=None, dataset_kwargs={"data_files": {split: str(path)}}, test_split=split,
        validation_split=None, training_split=None, fewshot_split=None,
    )
    config.pop("tag", None)
    config.pop("group", None)
    return config


def _check_resources(task: LMEvalTask) -> None:
    if task.name in _NEEDS_PUNKT:
        import nltk

        try:
            nltk.data.find("tokenizers/punkt_tab")
        except LookupError as e:
            raise LookupError(f"NLTK data `punkt_tab` not found (searched {nltk.data.path}); `make setup` "
                              f"installs it in {NLTK_DIR}") from e


def _numbers(results: dict) -> dict[str, float]:
    out = {}
    for key, value in results.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and key not in ("samples", "sample_len"):
            out[key.replace(",none", "")] = float(value) if not math.isnan(value) else math.nan
    return out


def run_general_tasks(cfg: LMEvalConfig, model: str, tokenizer: str) -> dict[str, dict]:
    """task name -> {"status": "ok", "metrics": {...}} or {"status": "unavailable", "reason": ...}."""
    if not cfg.tasks:
        return {}
    if "NLTK_DATA" not in os.environ and NLTK_DIR.exists():
        os.environ["NLTK_DATA"] = str(NLTK_DIR)
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    gpu = _cuda()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=cfg.batch_size,
              dtype="bfloat16" if gpu else "float32", device="cuda" if gpu else "cpu")
    manager = TaskManager()
    chat = getattr(lm.tokenizer, "chat_template", None) is not None
    gen_kwargs = {"max_gen_toks": cfg.max_gen_toks} if cfg.max_gen_toks else None
    out: dict[str, dict] = {}
    for task in cfg.tasks:
        try:
            _check_resources(task)
            spec = _task_spec(task, manager)
            res = lm_eval.simple_evaluate(model=lm, tasks=[spec], limit=cfg.limit, gen_kwargs=gen_kwargs,
                                          apply_chat_template=chat, log_samples=False, task_manager=manager,
                                          bootstrap_iters=0)
            name = spec if isinstance(spec, str) else spec["task"]
            out[task.label] = {"status": "ok", "metrics": _numbers(res["results"][name]),
                              "documents": res.get("n-samples", {}).get(name, {}).get("effective")}
        except Exception as e:  # noqa: BLE001 - one task's failure is reported, the rest go on
            log.warning("lm-eval task %s unavailable: %s: %s", task.name, type(e).__name__, e)
            out[task.label] = {"status": "unavailable", "reason": f"{type(e).__name__}: {e}"[:500]}
    return out


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
