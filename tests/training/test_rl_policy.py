"""One RL update (issue 11 points 4 and 6): micro-batching and the number of processes do
not change it; the problem order depends only on the step."""

from __future__ import annotations

import asyncio
import math
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

from configs.rollout import RolloutConfig
from configs.schema import RLConfig
from datalib.records import RLProblem
from rollout.runtime import RolloutRuntime
from rollout.trajectory import Trajectory
from stagekit.paths import REPO_ROOT
from training.rl import push_weights, step_problems
from training.rl_policy import Policy

HERE = os.path.dirname(os.path.abspath(__file__))


def fixed_trajectories(n: int = 6, seed: int = 0) -> tuple[list[Trajectory], list[float]]:
    """Trajectories of random tokens: model spans (mask 1) around a tool-feedback span (mask 0)."""
    rng = random.Random(seed)
    out, advantages = [], []
    for i in range(n):
        t = Trajectory(i, 0, [rng.randrange(5, 4000) for _ in range(rng.randint(4, 9))])
        t.append([rng.randrange(5, 4000) for _ in range(rng.randint(3, 12))], 1)
        t.append([rng.randrange(5, 4000) for _ in range(rng.randint(2, 6))], 0)
        t.append([rng.randrange(5, 4000) for _ in range(rng.randint(1, 8))], 1)
        out.append(t)
        advantages.append(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 1.5))
    return out, advantages


def _updated(model: str, micro: int) -> tuple[dict, dict[str, torch.Tensor]]:
    rl = RLConfig(lr=1e-3, warmup_steps=1, micro_batch_per_device=micro)
    policy = Policy(model, rl, pad_id=0)
    stats = policy.update(*fixed_trajectories())
    return vars(stats), {k: v.detach().clone() for k, v in policy.state_dict().items()}


def test_micro_batch_size_does_not_change_the_update(tiny_assets):
    base = {k: v.clone() for k, v in Policy(tiny_assets.model, RLConfig(), 0).state_dict().items()}
    (s1, p1), (s3, p3), (s6, p6) = (_updated(tiny_assets.model, m) for m in (1, 3, 6))
    assert s1["loss_tokens"] == s3["loss_tokens"] == s6["loss_tokens"] == sum(
        sum(t.loss_mask) for t in fixed_trajectories()[0])
    for s in (s3, s6):
        assert s["loss"] == pytest.approx(s1["loss"], rel=1e-5, abs=1e-7)
        assert s["grad_norm"] == pytest.approx(s1["grad_norm"], rel=1e-4)
    moved = max((p1[k] - base[k]).abs().max().item() for k in base)
    assert moved > 1e-4  # the update did something
    # Adam's first step is about lr * sign(grad): where a gradient is near zero, float
    # summation order moves it by up to a few 1e-6 (lr 1e-3); a wrong weighting moves it by lr.
    for k in p1:
        torch.testing.assert_close(p3[k], p1[k], rtol=0, atol=2e-5)
        torch.testing.assert_close(p6[k], p1[k], rtol=0, atol=2e-5)


def test_problem_order_depends_only_on_the_step():
    problems = [RLProblem(id=str(i), source="t", problem=f"p{i}", answer=i) for i in range(10)]
    epoch0 = [p.id for s in range(5) for p in step_problems(problems, s, 2, seed=3)]
    assert sorted(epoch0) == [str(i) for i in range(10)]  # each problem once per epoch
    assert [p.id for p in step_problems(problems, 3, 2, seed=3)] == epoch0[6:8]  # no state: resumable
    epoch1 = [p.id for s in range(5, 10) for p in step_problems(problems, s, 2, seed=3)]
    assert sorted(epoch1) == sorted(epoch0) and epoch1 != epoch0  # a fresh order each epoch
    assert [p.id for p in step_problems(problems, 0, 4, seed=4)] != epoch0[:4]


DRIVER = textwrap.dedent('''
    import sys, torch
    from configs.schema import RLConfig
    from training.rl_policy import Policy
    model, out, micro, here = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    sys.path.insert(0, here)
    from test_rl_policy import fixed_trajectories
    policy = Policy(model, RLConfig(lr=1e-3, warmup_steps=1, micro_batch_per_device=micro), pad_id=0)
    stats = policy.update(*fixed_trajectories())
    state = policy.state_dict()
    if policy.rank == 0:
        torch.save({"stats": vars(stats), "params": state}, out)
''')


@pytest.mark.slow
def test_two_processes_make_the_update_of_one(tiny_assets, tmp_path):
    """Rollouts are shared, not regenerated per process: both processes get the same kept list
    and each trains on its half (rank::world); the update equals one process's."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    # 6 trajectories, micro-batch 2: each process gets 3, in 2 micro-batches.
    for launcher, name in ((accelerate, "two"), ([sys.executable], "one")):
        args = [*launcher, str(driver), tiny_assets.model, str(tmp_path / name), "2", HERE]
        run = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (name, run.stderr[-3000:])
    one, two = (torch.load(tmp_path / n) for n in ("one", "two"))
    assert two["stats"]["loss"] == pytest.approx(one["stats"]["loss"], rel=1e-5, abs=1e-7)
    assert two["stats"]["grad_norm"] == pytest.approx(one["stats"]["grad_norm"], rel=1e-4)
    for k, v in one["params"].items():
        torch.testing.assert_close(two["params"][k], v, rtol=0, atol=2e-5)  # as in the test above


def _engine(model: str):
    from rollout.engines.hf import HFEngine

    return HFEngine.from_pretrained(model, kv_capacity_tokens=4096)


def test_new_weights_reach_an_hf_engine_in_memory(tiny_assets, tmp_path):
    policy = Policy(tiny_assets.model, RLConfig(lr=1e-3, warmup_steps=1), pad_id=0)
    policy.update(*fixed_trajectories())
    engine = _engine(tiny_assets.model)
    rt = RolloutRuntime(RolloutConfig(), None, [engine], None)
    assert asyncio.run(push_weights(rt, policy, tmp_path / "scratch", None)) == 1 == engine.weight_version
    served = engine._model.state_dict()
    for k, v in policy.state_dict().items():
        assert torch.equal(served[k], v), k
    assert not (tmp_path / "scratch").exists()  # nothing went through the disk


def test_new_weights_reach_an_sglang_server_from_disk(tiny_assets, tmp_path):
    """SGLang's path: the policy is written, then `/update_weights_from_disk` (fake server)."""
    from transformers import AutoTokenizer

    from rollout.engines.fake_sglang import serve_in_thread
    from rollout.engines.sglang import SGLangEngine

    policy = Policy(tiny_assets.model, RLConfig(lr=1e-3, warmup_steps=1), pad_id=0)
    policy.update(*fixed_trajectories())
    backend = _engine(tiny_assets.model)
    with serve_in_thread(backend) as (url, _):
        async def push() -> None:
            client = SGLangEngine(url)
            rt = RolloutRuntime(RolloutConfig(), None, [client], None)
            await push_weights(rt, policy, tmp_path / "scratch", AutoTokenizer.from_pretrained(tiny_assets.tokenizer))
            await client.aclose()

        asyncio.run(push())
    served = backend._model.state_dict()
    for k, v in policy.state_dict().items():
        assert torch.equal(served[k], v), k
    assert (tmp_path / "scratch" / "tokenizer_config.json").exists()


def _engine_logprobs(model: str, trajectories: list[Trajectory], shifts: list[float]) -> None:
    """Give each trajectory the log-probs an engine would record: the model's own at T 1,
    moved by `shifts[i]` (a behaviour policy that many nats off the trainer's)."""
    from transformers import AutoModelForCausalLM

    from training.rl_loss import make_batch, token_logprobs

    lm = AutoModelForCausalLM.from_pretrained(model).eval()
    for t, shift in zip(trajectories, shifts, strict=True):
        mb = make_batch([t], [0.0], pad_id=0)
        with torch.no_grad():
            own = token_logprobs(lm, mb.input_ids, mb.attention_mask, 1.0)[0]
        p = len(t.prompt_ids)
        t.logprobs = [float(own[p - 1 + j]) + shift if m else 0.0 for j, m in enumerate(t.loss_mask)]


def test_the_ratio_is_against_the_engines_logprobs_and_the_clip_binds_where_it_should(tiny_assets):
    """A behaviour policy 0.5 nats more confident than the trainer: every ratio is exp(-0.5) =
    0.61, under 1 - 0.2, so the clip binds on exactly the tokens of negative advantages."""
    trajectories, advantages = fixed_trajectories()
    _engine_logprobs(tiny_assets.model, trajectories, [0.5] * len(trajectories))
    tokens = [sum(t.loss_mask) for t in trajectories]
    engine = Policy(tiny_assets.model, RLConfig(lr=1e-3, warmup_steps=1, max_staleness_steps=1), 0)
    assert engine.rl.old_logprob_source == "engine"
    s = engine.update(trajectories, advantages)
    assert s.ratio_mean == pytest.approx(math.exp(-0.5), abs=1e-4) and s.ratio_std < 1e-3
    assert (s.ratio_min, s.ratio_max) == (pytest.approx(math.exp(-0.5), abs=1e-3),) * 2
    negative = sum(n for n, a in zip(tokens, advantages, strict=True) if a < 0)
    assert 0 < negative < sum(tokens) and s.clip_ratio == pytest.approx(negative / sum(tokens))
    # The trainer's own log-probs (synchronous default): ratio 1, nothing clipped.
    own = Policy(tiny_assets.model, RLConfig(lr=1e-3, warmup_steps=1), 0).update(trajectories, advantages)
    assert (own.ratio_mean, own.ratio_std, own.clip_ratio) == (pytest.approx(1.0), pytest.approx(0.0, abs=1e-6), 0.0)


def test_truncated_importance_weights_scale_each_token_and_the_cap_cuts(tiny_assets):
    """rl.tis_cap 2: trajectories whose engine log-probs are 1 nat under the trainer's weigh
    min(e, 2) = 2 (capped), those 1 nat over weigh 1/e; the loss is their weighted token mean."""
    trajectories, advantages = fixed_trajectories()
    shifts = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    _engine_logprobs(tiny_assets.model, trajectories, shifts)
    rl = RLConfig(lr=1e-3, warmup_steps=1, max_staleness_steps=1, tis_cap=2.0)
    assert rl.old_logprob_source == "recompute"  # decoupled: the ratio against the trainer's own
    s = Policy(tiny_assets.model, rl, 0).update(trajectories, advantages)
    tokens = [sum(t.loss_mask) for t in trajectories]
    weights = [min(math.exp(-shift), 2.0) for shift in shifts]
    total = sum(tokens)
    assert s.tis_capped == pytest.approx(sum(tokens[:3]) / total)
    assert s.tis_mean == pytest.approx(sum(w * n for w, n in zip(weights, tokens, strict=True)) / total, rel=1e-4)
    # ratio 1: the loss is minus the weighted token mean of the advantages
    expected = -sum(a * w * n for a, w, n in zip(advantages, weights, tokens, strict=True)) / total
    assert s.loss == pytest.approx(expected, rel=1e-4)
    with pytest.raises(ValueError, match="tis_cap"):
        RLConfig(tis_cap=2.0, old_logprobs="engine")
