"""PROF's process reward model: a response split into steps, one PRM score per step (SPEC §6).

Format, from the Qwen2.5-Math-PRM-7B model card (huggingface.co/Qwen/Qwen2.5-Math-PRM-7B,
"Quick Start": its `make_step_rewards`), its config.json (`qwen2`, 4096 positions) and the
engines that serve it (sglang/srt/models/qwen2_rm.py, vLLM's `Qwen2ForProcessRewardModel`):
- steps are the response split on blank lines ("\\n\\n"), each stripped;
- the conversation is the tokenizer's chat template over three turns: system
  `Please reason step by step, and put your final answer within \\boxed{}.`, the problem as
  the user turn, and as the assistant turn the steps joined by `<extra_0>` with one more
  `<extra_0>` after the last step;
- the model is a Qwen2 decoder with a token-classification head
  `score = Sequential(Linear(h, h), ReLU, Linear(h, 2))`: logits of shape (batch, seq, 2);
- a step's score is `softmax(logits)[..., 1]` at that step's `<extra_0>` token.

Loading. The hub checkpoint's config names remote code (`auto_map` → `modeling_qwen2_rm.py`,
meant for `AutoModel.from_pretrained(..., trust_remote_code=True)`). We never execute it:
code fetched from a hub does not run in the pipeline's process. `Qwen2ForProcessRewardModel`
below is the same architecture with the same parameter names (`model.*`, `score.0.*`,
`score.2.*`), built from the checkpoint's plain `qwen2` config, and loading refuses a
checkpoint that lacks any of its weights (a random head would score silently). The tiny
PRM of `training.tiny_prm` is saved from this class and takes the same path.

Length. The input is cut to `max_length` tokens (default: the model's
`max_position_embeddings`). The model is causal, so the
steps whose separator lies inside the window keep exactly the scores they would have
untruncated; the steps past it get NaN (or, with `overflow="error"`, scoring raises).
NaN cannot be averaged by accident: the caller decides (e.g. mean over the scored prefix).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from typing import Literal

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase, Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import Qwen2Model, Qwen2PreTrainedModel

log = logging.getLogger(__name__)

STEP_SEPARATOR = "<extra_0>"
PRM_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")  # a line holding only spaces/tabs counts as blank


def prm_response(model_text: str, special_tokens: Iterable[str]) -> str:
    """The model's text as the PRM should read it: without the policy tokenizer's special tokens
    (`<|im_end|>` ending each turn, `<|endoftext|>`), which the policy's turns keep when decoded;
    inside the PRM's assistant turn they would read as turn markers (issue 25, point 1)."""
    for token in sorted(set(special_tokens), key=len, reverse=True):
        model_text = model_text.replace(token, "")
    return model_text


def split_steps(text: str) -> list[str]:
    """Steps of a response: split on blank lines, stripped, empty ones dropped. A literal
    separator in the text is removed first: it would add a scored position of its own."""
    parts = _BLANK_LINE.split(text.replace(STEP_SEPARATOR, ""))
    return [s for s in (part.strip() for part in parts) if s]


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    """Qwen2 decoder + 2-class head per token: the layout of Qwen2.5-Math-PRM checkpoints."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]  # some exports keep the LM head

    def __init__(self, config: Qwen2Config) -> None:
        super().__init__(config)
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (batch, seq, 2); class 1 is "this step is correct"."""
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return self.score(out.last_hidden_state)


class ProcessRewardModel:
    """A PRM and its tokenizer; `step_scores` gives one probability per step."""

    def __init__(
        self,
        model: Qwen2ForProcessRewardModel,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int | None = None,
        overflow: Literal["nan", "error"] = "nan",
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = max_length or model.config.max_position_embeddings
        self.overflow = overflow
        self.separator_id = _separator_id(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        # A separator or another special token of the PRM's typed in the text would add a scored
        # position, or a turn marker, nobody asked for: removed from every input.
        self._specials = [*tokenizer.all_special_tokens, STEP_SEPARATOR]

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | str = "auto",
        max_length: int | None = None,
        overflow: Literal["nan", "error"] = "nan",
    ) -> ProcessRewardModel:
        """`name_or_path`: a hub id (`PROFConfig.prm`) or a local directory such as the tiny PRM."""
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model, info = Qwen2ForProcessRewardModel.from_pretrained(
            name_or_path, dtype=dtype, device_map=device, output_loading_info=True
        )
        if info["missing_keys"]:
            missing = sorted(info["missing_keys"])
            raise ValueError(f"{name_or_path}: not a Qwen2 PRM checkpoint, weights missing: {missing[:5]}…")
        return cls(model, tokenizer, max_length=max_length, overflow=overflow)

    def encode(self, problem: str, steps: list[str]) -> list[int]:
        """Token ids of the PRM input, untruncated: one separator after each step."""
        problem = prm_response(problem, self._specials)
        steps = [prm_response(s, self._specials) for s in steps]
        messages = [
            {"role": "system", "content": PRM_SYSTEM_PROMPT},
            {"role": "user", "content": problem},
            {"role": "assistant", "content": STEP_SEPARATOR.join(steps) + STEP_SEPARATOR},
        ]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        found = sum(1 for t in ids if t == self.separator_id)
        if found != len(steps):
            raise ValueError(
                f"PRM input has {found} separator tokens for {len(steps)} steps: the chat template of "
                f"{self.tokenizer.name_or_path} adds or drops {STEP_SEPARATOR}"
            )
        return ids

    @torch.no_grad()
    def step_scores(self, problems: list[str], responses: list[str], batch_size: int = 16) -> list[list[float]]:
        """For each response, P(step correct) for each of its `split_steps`, NaN for steps past
        `max_length`; [] for a response with no step."""
        if len(problems) != len(responses):
            raise ValueError(f"{len(problems)} problems for {len(responses)} responses")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        scores: list[list[float]] = [[] for _ in responses]
        inputs: dict[int, list[int]] = {}
        num_steps: dict[int, int] = {}
        for i, (problem, response) in enumerate(zip(problems, responses, strict=True)):
            steps = split_steps(response)
            if steps:
                inputs[i], num_steps[i] = self.encode(problem, steps), len(steps)
        self._check_lengths(inputs)
        # Longest first: batches of similar lengths pad little, and memory peaks at once.
        order = sorted(inputs, key=lambda i: len(inputs[i]), reverse=True)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, row in zip(chunk, self._score_batch([inputs[i] for i in chunk]), strict=True):
                scores[i] = row + [math.nan] * (num_steps[i] - len(row))  # steps cut by max_length
        return scores

    def _check_lengths(self, inputs: dict[int, list[int]]) -> None:
        over = [i for i, ids in inputs.items() if len(ids) > self.max_length]
        if not over:
            return
        longest = max(len(inputs[i]) for i in over)
        message = f"{len(over)} PRM inputs exceed max_length={self.max_length} tokens (longest {longest})"
        if self.overflow == "error":
            raise ValueError(f"{message}: responses {over[:10]}")
        log.warning("%s: their steps past the limit score NaN", message)

    def _score_batch(self, batch: list[list[int]]) -> list[list[float]]:
        batch = [ids[: self.max_length] for ids in batch]
        width = max(len(ids) for ids in batch)
        device = self.model.device
        # Right padding: with causal attention a real token never sees the pads after it,
        # so padding cannot change a score (tests/training/test_prm.py checks it).
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        logits = self.model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device))
        positive = torch.softmax(logits.float(), dim=-1)[..., 1].cpu()
        out = []
        for row in range(len(batch)):
            at = (input_ids[row] == self.separator_id) & (attention_mask[row] == 1)
            out.append(positive[row][at].tolist())
        return out


def _separator_id(tokenizer: PreTrainedTokenizerBase) -> int:
    ids = tokenizer(STEP_SEPARATOR, add_special_tokens=False)["input_ids"]
    if len(ids) != 1 or tokenizer.convert_ids_to_tokens(ids[0]) != STEP_SEPARATOR:
        raise ValueError(
            f"tokenizer {tokenizer.name_or_path!r} has no {STEP_SEPARATOR} token (it encodes as {ids}): "
            "a Qwen2.5-Math-PRM style model needs it as one added token to mark where steps end"
        )
    return ids[0]
