"""A tiny process reward model built offline, with the contract of Qwen2.5-Math-PRM-7B.

PROF's tests and the tiny config need a PRM that loads and scores exactly like the real
one (training/prm.py cites the format). So the tiny PRM is the same class,
`training.prm.Qwen2ForProcessRewardModel` (a Qwen2 decoder and a Linear-ReLU-Linear head
with 2 classes per token, parameter names as in the hub checkpoint), saved with
`save_pretrained` and loaded by the same `ProcessRewardModel.from_pretrained`. A stock
`Qwen3ForTokenClassification(num_labels=2)` would give the same output shape but another
head and another loading path, so a bug in our loader could pass on it and fail on the
real checkpoint.

The tokenizer is the project's small BPE (assets/tokenizer_build.py) with `<extra_0>`
added as one special token and the Qwen2.5 chat template (the PRM's; TRL ships the
original as `qwen2_5.jinja`). Random weights: its scores mean nothing, but they are
initialised wide enough to spread over (0, 1), so tests that compare scores can tell one
position from another.

    python -m training.tiny_prm OUT_DIR
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
import trl
from tokenizers import AddedToken
from transformers import AutoTokenizer, Qwen2Config

from assets.tokenizer_build import build_small_tokenizer
from configs.schema import TinyModelConfig
from training.prm import STEP_SEPARATOR, Qwen2ForProcessRewardModel

HIDDEN_SIZE = 64
MAX_POSITIONS = 1024
# Std of every weight at init. At Qwen2's default 0.02 a separator's hidden state is its
# own embedding, context barely moves it, and all steps score within ±0.02 of each other;
# at 0.12 they spread over about 0.15-0.75 (standard deviation 0.12) on varied steps.
INIT_STD = 0.12


def qwen2_5_template() -> str:
    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def build_tiny_prm(out_dir: Path, seed: int = 0, tokenizer_dir: Path | None = None) -> Path:
    """Write tokenizer and model to `out_dir`. `tokenizer_dir`: a small BPE to start from
    (built here, about 6 s, when absent)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        if tokenizer_dir is None:
            cfg = TinyModelConfig()
            tokenizer_dir = build_small_tokenizer(Path(scratch), cfg.vocab_size, cfg.tokenizer_corpus_lines, seed)
        tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.add_tokens([AddedToken(STEP_SEPARATOR, special=True, normalized=False)], special_tokens=True)
    tok.chat_template = qwen2_5_template()
    tok.save_pretrained(out_dir)

    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=2 * HIDDEN_SIZE,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        initializer_range=INIT_STD,
    )
    torch.manual_seed(seed)
    model = Qwen2ForProcessRewardModel(config)
    model.save_pretrained(out_dir)
    return out_dir


def main() -> None:
    print(build_tiny_prm(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
