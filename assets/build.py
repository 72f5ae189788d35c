"""Stage `assets`: the model and tokenizers every later stage loads (SPEC §1).

For `model.base: tiny` it builds, offline, the real-vocabulary Qwen3 tokenizer, a ~4K BPE
tokenizer (unless `model.tiny.tokenizer: qwen3`: then the model uses the real one) and a
tiny random Qwen3ForCausalLM on the chosen tokenizer. For a Hugging Face id (or a local
path) it records the id: loading goes through the same `from_pretrained` calls.

    python -m assets.build --config configs/tiny.yaml
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from assets.tiny_model import build_tiny_model
from assets.tokenizer_build import build_qwen3_tokenizer, build_small_tokenizer
from configs.schema import ModelConfig
from stagekit import artifacts, progress

log = logging.getLogger(__name__)


def run(cfg: ModelConfig, inputs: dict[str, Path], out_dir: Path) -> dict[str, float]:
    if cfg.base != "tiny":
        record = {"model": cfg.base, "tokenizer": cfg.tokenizer or cfg.base, "real_tokenizer": None}
        (out_dir / artifacts.ASSETS).write_text(json.dumps(record, indent=2))
        return {"built_offline": 0}
    progress.report(0, 3, "rebuilding the Qwen3 tokenizer from its BPE ranks")
    build_qwen3_tokenizer(out_dir / "qwen3_tokenizer")
    tokenizer = "qwen3_tokenizer"
    if cfg.tiny.tokenizer == "small":
        progress.report(1, 3, "training the small BPE tokenizer")
        build_small_tokenizer(out_dir / "tokenizer", cfg.tiny.vocab_size, cfg.tiny.tokenizer_corpus_lines)
        tokenizer = "tokenizer"
    progress.report(2, 3, "initialising the tiny Qwen3 model")
    n_params = build_tiny_model(out_dir / "model", cfg.tiny, out_dir / tokenizer, seed=cfg.tiny.init_seed)
    progress.report(3, 3, "done")
    record = {"model": "model", "tokenizer": tokenizer, "real_tokenizer": "qwen3_tokenizer"}
    (out_dir / artifacts.ASSETS).write_text(json.dumps(record, indent=2))
    log.info("tiny model: %d parameters", n_params)
    return {"built_offline": 1, "model_parameters": n_params, "vocab_size": cfg.tiny.vocab_size}


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("assets")


if __name__ == "__main__":
    main()
