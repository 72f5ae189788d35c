"""Stage `sft`: the non-reasoning cold start, TRL's SFTTrainer on tool-calling chats (SPEC §7).

Inputs, by role: `base`, the `assets` artifact (model and tokenizer, built offline or a
hub id), and `chats`, the `cold_start` artifact (`sft.parquet`). Loss on assistant tokens only (tool calls
included; system, user and tool feedback masked) through the chat template's
`{% generation %}` markers (training/sft_data.py). The global batch is fixed by the
config and split over processes (training/batch_plan.py). Checkpoints go to the stage's
work directory every `checkpoint_every_steps`; a rerun after a kill resumes from the
last one with the same data order. Output: `model/` (weights, tokenizer with the
project's chat template), `curves.csv`, `curves.png`, `tensorboard/`, and, when
`heldout.enabled`, accuracy before and after on held-out problems in the metrics.

    python -m training.sft --config configs/tiny.yaml
    accelerate launch --config_file configs/accelerate/zero3.yaml -m training.sft --config configs/rstar2_agent_14b.yaml
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM
from trl import SFTConfig as TRLSFTConfig
from trl import SFTTrainer

from assets.paths import asset_paths
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import SFTConfig
from stagekit import artifacts, progress
from stagekit.workdir import WorkDir
from training.batch_plan import BatchPlan
from training.curves import CurveLogger, plot_curves
from training.heldout import heldout_accuracy, heldout_metrics
from training.sft_checkpoints import resume_checkpoint
from training.sft_data import SFTDataError, chat_rows, training_tokenizer, truncation
from training.sft_head import label_only_head, supports_label_only_head

log = logging.getLogger(__name__)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))  # set by accelerate launch / torchrun


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def build_trainer(cfg: SFTConfig, model_path: str, tokenizer_path: str, sft_parquet: Path, trainer_dir: Path,
                  curves_dir: Path, max_steps: int = -1) -> SFTTrainer:
    """The TRL trainer for this config; `max_steps` > 0 cuts training short (tests, benchmarks)."""
    plan = BatchPlan.make(cfg.global_batch_size, cfg.micro_batch_per_device, world_size())
    tokenizer = training_tokenizer(tokenizer_path)
    on_gpu = torch.cuda.is_available()
    args = TRLSFTConfig(
        output_dir=str(trainer_dir),
        learning_rate=cfg.lr,
        per_device_train_batch_size=plan.micro_batch_per_device,
        gradient_accumulation_steps=plan.accumulation,
        num_train_epochs=cfg.epochs,
        max_steps=max_steps,
        lr_scheduler_type="constant_with_warmup" if cfg.lr_scheduler == "constant" else cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,  # a float in [0, 1) is a share of the total steps (transformers 5)
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=on_gpu,
        use_cpu=not on_gpu,
        assistant_only_loss=True,
        max_length=cfg.max_seq_tokens,
        packing=cfg.packing,
        packing_strategy="bfd",
        padding_free=cfg.packing,
        save_strategy="steps",
        save_steps=cfg.checkpoint_every_steps,
        logging_steps=1,
        report_to="none",  # TensorBoard below, writing beside the curves rather than under the work dir
        dataset_num_proc=None,
        gradient_checkpointing=on_gpu,
        disable_tqdm=not is_main_process(),
    )
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16 if on_gpu else torch.float32)
    rows = chat_rows(sft_parquet)
    cut = truncation(rows, tokenizer, cfg.max_seq_tokens)
    if cut.emptied == len(rows):
        raise SFTDataError(f"{sft_parquet}: all {len(rows)} conversations lost every assistant token to "
                           f"truncation at sft.max_seq_tokens={cfg.max_seq_tokens}; raise it")
    if cut.truncated:
        log.warning("sft: %d of %d conversations are longer than sft.max_seq_tokens=%d: %.1f%% of the assistant "
                    "tokens are cut and not trained on, and %d conversations keep none (%s)", cut.truncated,
                    len(rows), cfg.max_seq_tokens, 100 * cut.assistant_tokens_lost / max(cut.assistant_tokens, 1),
                    cut.emptied, "dropped by TRL" if not cfg.packing else "trained on with no loss token")
    dataset = Dataset.from_list([{"messages": r["messages"], "tools": r["tools"]} for r in rows])
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    callbacks = [CurveLogger(curves_dir)]
    if is_main_process():
        callbacks.append(TensorBoardCallback(SummaryWriter(str(curves_dir / artifacts.TENSORBOARD))))
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                         callbacks=callbacks)
    trainer.truncation = cut  # type: ignore[attr-defined]
    if cfg.lm_head == "labelled" or (cfg.lm_head == "auto" and not on_gpu and supports_label_only_head(model)):
        label_only_head(model)
    return trainer


HELDOUT_SHARE = 0.05  # each held-out check: about 30 s of the tiny config's SFT (docs/learning.md)


def run(cfg: SFTConfig, rollout: RolloutConfig, sandbox: SandboxConfig, inputs: dict[str, Path], out_dir: Path,
        work: WorkDir | None = None, max_steps: int = -1) -> dict[str, float]:
    paths = asset_paths(inputs["base"])
    sft_parquet = inputs["chats"] / artifacts.CHATS
    if not sft_parquet.exists():
        raise FileNotFoundError(f"the cold_start artifact {inputs['chats']} has no {artifacts.CHATS}")
    # TRL's own checkpoints (weights, optimizer, scheduler, RNG, data position), kept in the
    # stage's persistent work dir (stagekit/workdir.py) so that a killed run resumes.
    trainer_dir = (work.path if work else out_dir / "_work") / "trainer"
    metrics: dict[str, float] = {}
    check = HELDOUT_SHARE if cfg.heldout.enabled else 0.0  # of the stage's progress bar, each time
    if cfg.heldout.enabled and is_main_process():
        with progress.share(0.0, check, "sft: held-out check before training"):
            metrics |= heldout_metrics(heldout_accuracy(cfg.heldout, paths.model, paths.tokenizer, rollout, sandbox),
                                       "before")

    trainer = build_trainer(cfg, paths.model, paths.tokenizer, sft_parquet, trainer_dir, out_dir, max_steps)
    resume = resume_checkpoint(trainer_dir, is_main_process())  # incomplete ones set aside
    if resume:
        log.info("sft: resuming from %s", resume)
    with progress.share(check, 1.0 - check, "sft: training"):
        result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(out_dir / artifacts.MODEL))  # the tokenizer (with its chat template) goes along
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # NOTES.md: without this a gloo run aborts at exit (SIGABRT) about two runs in three
        trainer.accelerator.wait_for_everyone()
        torch.distributed.destroy_process_group()
    if not is_main_process():
        return {}
    plot_curves(out_dir / artifacts.CURVES, out_dir / artifacts.CURVES_PLOT, f"SFT: {paths.model}")
    metrics |= trainer.truncation.metrics() | {
                "steps": trainer.state.global_step, "train_loss": round(result.training_loss, 5),
                "final_loss": round(trainer.state.log_history[-2]["loss"], 5) if len(trainer.state.log_history) > 1
                else None, "resumed_from_step": int(resume.rsplit("-", 1)[1]) if resume else 0,
                "processes": world_size(), "accumulation": trainer.args.gradient_accumulation_steps}
    if cfg.heldout.enabled:
        trained = str(out_dir / artifacts.MODEL)
        with progress.share(1.0 - check, 1.0, "sft: held-out check after training"):
            after = heldout_accuracy(cfg.heldout, trained, trained, rollout, sandbox)
        metrics |= heldout_metrics(after, "after")
    if work is None:
        shutil.rmtree(out_dir / "_work", ignore_errors=True)
    return metrics


def main() -> None:
    from orchestrator.cli import stage_main

    stage_main("sft")


if __name__ == "__main__":
    main()
