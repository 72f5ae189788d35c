"""The policy being trained by RL: model, AdamW, warmup schedule, and one update per step (SPEC §6-§7).

`Policy.update` takes the kept trajectories of a step with their advantages and makes
exactly one optimizer step: the loss is the token-level mean over every loss token of
the step (training/rl_loss.py), accumulated over micro-batches and processes, so neither
the micro-batch size nor the number of processes changes the update.

Processes (accelerate, DDP on CPU/gloo or GPUs): every process holds the whole kept list
(rolled out once, on the main process, and broadcast by the stage). The step's
micro-batches are contiguous runs of that list, the same for any number of processes;
process r takes micro-batches r, r + world, … and every process runs as many (a process
short of one runs a zero-weighted one), so the collective calls match. DDP averages gradients
over processes, so each process scales its share by `world / loss_tokens_total`.

The micro-batch count varies from step to step, so the DeepSpeed boundary is set per
micro-batch rather than by a fixed accumulation count. The DeepSpeed path was not run
here (no GPU); DDP on CPU/gloo is what the tests run.

Old log-probs (`rl.old_logprob_source`): `recompute` (the reference's default: the trainer's
own log-probs before the update, no gradient) or `engine` (the sampling log-probs the engine
returned: the behaviour policy's, which asynchronous RL needs). There is one optimizer step
per RL step, so `recompute` is the current forward pass detached. `rl.tis_cap` adds
truncated importance weights min(exp(recomputed - engine), cap) per token.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from configs.schema import RLConfig
from rollout.trajectory import Trajectory
from training.rl_loss import make_batch, policy_loss, token_logprobs

log = logging.getLogger(__name__)


@dataclass
class UpdateStats:
    loss: float  # the step's token-mean loss (summed over micro-batches and processes)
    grad_norm: float  # before clipping
    learning_rate: float
    loss_tokens: int  # model-generated tokens the loss averaged over
    clip_ratio: float  # share of loss tokens whose ratio was clipped
    # The PPO ratio over the loss tokens, at the step's forward pass (before the update): its
    # spread is the policy's lag behind the weights that sampled, plus engine/trainer mismatch.
    ratio_mean: float = 1.0
    ratio_std: float = 0.0
    ratio_min: float = 1.0
    ratio_max: float = 1.0
    tis_mean: float = 1.0  # mean truncated importance weight (1 when rl.tis_cap is unset)
    tis_capped: float = 0.0  # share of loss tokens whose weight the cap cut


class Policy:
    def __init__(self, model_path: str, rl: RLConfig, pad_id: int) -> None:
        self.rl, self.pad_id = rl, pad_id
        self.accelerator = Accelerator(cpu=not torch.cuda.is_available())
        dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        optimizer = torch.optim.AdamW(model.parameters(), lr=rl.lr, weight_decay=rl.weight_decay)
        warmup = max(rl.warmup_steps, 1)
        # SPEC §7: linear warmup over `warmup_steps` optimizer steps, then constant.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(model, optimizer, scheduler)

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def world(self) -> int:
        return self.accelerator.num_processes

    def bind_thread(self) -> None:
        """Make the calling thread train on this policy's device (accelerate sets the CUDA
        device in the thread that built it only); asynchronous RL trains in its own thread."""
        if self.accelerator.device.type == "cuda":
            torch.cuda.set_device(self.accelerator.device)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.accelerator.get_state_dict(self.model)

    def _shard(self, kept: list[Trajectory], advantages: list[float]) -> list[tuple[list[Trajectory], list[float]]]:
        """This process's micro-batches, as many on every process (see module docstring)."""
        size = self.rl.micro_batch_per_device
        # The step's micro-batches do not depend on the number of processes: contiguous runs
        # of the kept list, micro-batch k on process k % world. So each micro-batch pads and
        # sums the same trajectories however many processes run, and one process's gradient
        # is the sum of the same per-micro-batch gradients that several processes all-reduce.
        # Packing another set of trajectories per process (rank::world, as before issue 20)
        # moved float rounding, which Adam's first steps turn into lr-sized changes wherever
        # a gradient sits at the rounding floor (tied embedding rows of rare tokens).
        batches = [list(range(a, min(a + size, len(kept)))) for a in range(0, len(kept), size)]
        mine = batches[self.rank::self.world]
        count = math.ceil(len(batches) / self.world)
        mine += [[]] * (count - len(mine))
        return [([kept[i] for i in c], [advantages[i] for i in c]) if c else ([kept[0]], [math.nan])
                for c in mine]

    def update(self, kept: list[Trajectory], advantages: list[float]) -> UpdateStats:
        """One optimizer step on the kept trajectories of a step (every process passes the whole list)."""
        total = sum(sum(t.loss_mask) for t in kept)
        if total == 0:
            raise ValueError("update: the kept trajectories hold no model-generated token")
        device = self.accelerator.device
        temperature = self.rl.temperature
        self.model.train()
        source, cap = self.rl.old_logprob_source, self.rl.tis_cap
        sums = torch.zeros(6, dtype=torch.float64)  # loss, clipped, ratio, ratio², tis weight, tis capped
        lows, highs = [math.inf], [-math.inf]
        chunks = self._shard(kept, advantages)
        for k, (trajs, advs) in enumerate(chunks):
            # Under DeepSpeed, accelerate's backward steps the engine at a sync boundary:
            # only the last micro-batch of the step is one (DDP ignores this flag).
            self.accelerator.gradient_state._set_sync_gradients(k == len(chunks) - 1)
            dummy = math.isnan(advs[0])  # a process short of a micro-batch: same calls, zero weight
            mb = make_batch(trajs, [0.0] * len(trajs) if dummy else advs, self.pad_id).to(device)
            new = token_logprobs(self.model, mb.input_ids, mb.attention_mask, temperature)
            # One optimizer step per RL step: the weights before the update are the ones this
            # forward pass ran with, so "recompute" is the detached value (ratio 1), no extra pass.
            old = new.detach() if source == "recompute" else mb.old_logprobs
            weights = None
            if cap is not None:  # mb.old_logprobs are the engine's: the behaviour policy's
                log_w = torch.where(mb.loss_mask > 0, new.detach() - mb.old_logprobs, torch.zeros_like(new))
                weights = torch.exp(log_w).clamp(max=cap)
            loss, stats = policy_loss(new, old, mb.advantages, mb.loss_mask, self.rl.clip_low, self.rl.clip_high,
                                      total, dp_world_size=self.world, token_weights=weights)
            self.accelerator.backward(loss * (0.0 if dummy else 1.0))
            if not dummy:
                tis = (weights * mb.loss_mask).sum().item() if weights is not None else stats["loss_tokens"]
                capped = ((weights >= cap) & (mb.loss_mask > 0)).sum().item() if weights is not None else 0.0
                sums += torch.tensor([stats["loss_sum"] / total, stats["clipped_tokens"], stats["ratio_sum"],
                                      stats["ratio_sq_sum"], tis, capped], dtype=torch.float64)
                lows.append(stats["ratio_min"])
                highs.append(stats["ratio_max"])
        grad_norm = self.accelerator.clip_grad_norm_(self.model.parameters(), self.rl.grad_clip)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        s = self.accelerator.reduce(sums.to(device), reduction="sum").tolist()
        extremes = self.accelerator.gather(torch.tensor([[min(lows), max(highs)]], device=device)).tolist()
        mean = s[2] / total
        return UpdateStats(s[0], float(grad_norm), lr, total, s[1] / total, ratio_mean=mean,
                           ratio_std=math.sqrt(max(s[3] / total - mean * mean, 0.0)),
                           ratio_min=min(e[0] for e in extremes), ratio_max=max(e[1] for e in extremes),
                           tis_mean=s[4] / total, tis_capped=s[5] / total)

    def save_state(self, path: Path) -> None:
        """Model, optimizer, scheduler and RNG states (accelerate's format), to resume or continue."""
        self.accelerator.save_state(str(path))

    def load_state(self, path: Path) -> None:
        self.accelerator.load_state(str(path))

    def save_model(self, path: Path, tokenizer) -> None:
        state = self.state_dict()  # a collective under ZeRO-3: every process calls it
        if self.accelerator.is_main_process:
            self.accelerator.unwrap_model(self.model).save_pretrained(str(path), state_dict=state)
            tokenizer.save_pretrained(str(path))
