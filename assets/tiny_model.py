"""A tiny, randomly initialised Qwen3ForCausalLM for CPU runs and tests."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from configs.schema import TinyModelConfig


def build_tiny_model(out_dir: Path, cfg: TinyModelConfig, tokenizer_dir: Path, seed: int = 0) -> int:
    """Write the model to `out_dir`; returns its parameter count."""
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    if len(tok) > cfg.vocab_size:
        raise ValueError(f"model.tiny.vocab_size={cfg.vocab_size} is smaller than the tokenizer ({len(tok)})")
    config = Qwen3Config(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        head_dim=cfg.head_dim,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    # Qwen3 RMS-normalises q and k per head, so at the default weight 1 a head's attention
    # logits are bounded by sqrt(head_dim) (4 for head_dim 16): too flat to single out one
    # token among the ~500 of a tool-use conversation, and a random tiny model learned no
    # copying in 225 SFT steps. Trained checkpoints have grown these weights; starting at
    # 2.5 (bound 25) its next-digit accuracy left chance after ~300 steps, though it does
    # not copy reliably yet (README, "Does the tiny SFT teach?"). At head_dim 32 (the tiny
    # config's shape) the bound is 5.7 at weight 1, and weight 1 learned sooner: tiny.yaml sets it.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.fill_(cfg.qk_norm_init)
            layer.self_attn.k_norm.weight.fill_(cfg.qk_norm_init)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out_dir)
    return sum(p.numel() for p in model.parameters())
