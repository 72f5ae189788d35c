"""The label-only LM head (training/sft_head.py) against TRL's chunked one: same loss,
gradients and metrics on the same batch, and what it refuses."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from trl.trainer.utils import add_fused_lm_head

from training.sft_head import label_only_head, supports_label_only_head


def _model() -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, intermediate_size=64, tie_word_embeddings=True)
    return Qwen3ForCausalLM(cfg)


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 300, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # right padding
    labels = ids.clone()
    labels[:, :5] = -100  # a prompt
    labels[mask == 0] = -100
    labels[2, 7] = -100  # a masked tool response inside the completion
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _run(model: Qwen3ForCausalLM, batch: dict, **extra):
    model.zero_grad()
    out = model(**batch, fused_lm_head=True, **extra)
    out.loss.backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("num_items", [None, 40])
def test_loss_gradients_and_metrics_match_trls_head(num_items):
    trl_model = _model()
    ours = copy.deepcopy(trl_model)
    add_fused_lm_head(trl_model, outputs=("log_probs", "entropy", "is_top1"))
    add_fused_lm_head(ours, outputs=("log_probs", "entropy", "is_top1"))
    label_only_head(ours)
    batch = _batch()
    extra = {} if num_items is None else {"num_items_in_batch": num_items}
    (a, ga), (b, gb) = _run(trl_model, batch, **extra), _run(ours, batch, **extra)
    torch.testing.assert_close(b.loss, a.loss, rtol=1e-5, atol=1e-6)
    for name in ga:
        torch.testing.assert_close(gb[name], ga[name], rtol=1e-4, atol=1e-6, msg=name)
    assert torch.equal(b.label_mask, a.label_mask)
    assert int(b.label_mask.sum()) == int((batch["labels"][:, 1:] != -100).sum())
    torch.testing.assert_close(b.log_probs, a.log_probs, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b.entropy, a.entropy, rtol=1e-5, atol=1e-5)
    assert torch.equal(b.is_top1.bool(), a.is_top1.bool())
    # the loss is the model's own cross-entropy on the labelled tokens
    own = trl_model(**batch).loss if num_items is None else None
    if own is not None:
        torch.testing.assert_close(b.loss, own, rtol=1e-5, atol=1e-6)


def test_generation_path_is_the_models_own():
    model = _model()
    reference = copy.deepcopy(model)
    add_fused_lm_head(model)
    label_only_head(model)
    batch = _batch()
    torch.testing.assert_close(model(input_ids=batch["input_ids"]).logits,
                               reference(input_ids=batch["input_ids"]).logits)


def test_scaled_logits_are_left_to_trl():
    model = _model()
    model.config.final_logit_softcapping = 30.0
    assert not supports_label_only_head(model)
    with pytest.raises(ValueError, match="keep TRL's chunked head"):
        label_only_head(model)
