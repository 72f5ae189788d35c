"""The SFT loss's LM head on CPU: project only the positions that carry a label.

TRL's SFTTrainer replaces the model's forward with a chunked LM head (trl/kernels/
chunked_logprob.py) that never holds the [batch, length, vocab] logits. On a GPU with
Triton it scores only the labelled positions; elsewhere it scores every position, prompt
and padding included, in float32 tiles, and recomputes them in the backward pass. For the
tiny model on CPU that head was 70 % of an SFT step (cProfile of 8 steps: 20 of 29 s).

`label_only_head` puts a forward in its place that answers TRL's call the same way (a
`FusedCausalLMOutput` with the loss, per-token log-probabilities, entropy and top-1 flags,
zero where the label is -100) but runs the backbone, gathers the labelled positions and
projects them in one matrix product: the logits it holds are [labelled tokens, vocab],
small for the models that train on CPU. `python -m benchmarks.sft` measures both heads
in the same run; tests/training/test_sft_head.py checks that loss and gradients match.
"""

from __future__ import annotations

import types

import torch
from transformers import PreTrainedModel
from trl.trainer.utils import FusedCausalLMOutput


def supports_label_only_head(model: PreTrainedModel) -> bool:
    """Plain causal LMs only: no logit soft-capping or scaling, no MoE router loss to add."""
    text = model.config.get_text_config()
    return not any(getattr(text, name, None) for name in (
        "final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling",
        "output_router_logits"))


def label_only_head(model: PreTrainedModel) -> None:
    """Replace TRL's fused forward on `model` (after SFTTrainer's __init__ installed it)."""
    if not supports_label_only_head(model):
        raise ValueError(f"{type(model).__name__}: its logits are scaled or capped; keep TRL's chunked head")
    fused_forward = model.forward

    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None,
                **kwargs):
        if not fused_lm_head:  # generation, evaluation: TRL's forward passes these to the model's own
            return fused_forward(*args, labels=labels, shift_labels=shift_labels,
                                 num_items_in_batch=num_items_in_batch, **kwargs)
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, targets = hidden[:, :-1], labels[:, 1:]
        else:
            targets = shift_labels
        mask = targets != -100
        logits = self.get_output_embeddings()(hidden[mask]).float()
        logp = torch.log_softmax(logits, dim=-1)
        picked = logp.gather(-1, targets[mask].unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1)
            top1 = logits.argmax(-1) == targets[mask]

        def spread(values: torch.Tensor) -> torch.Tensor:
            return values.new_zeros(mask.shape).masked_scatter(mask, values)

        denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(loss=-picked.sum() / denominator, log_probs=spread(picked),
                                   entropy=spread(entropy), is_top1=spread(top1), label_mask=mask)

    model.forward = types.MethodType(forward, model)
