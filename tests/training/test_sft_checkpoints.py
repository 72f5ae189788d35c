"""SFT resumes from the last complete checkpoint whatever moment a kill cut the newest one
(issue 23, point 5): TRL writes `checkpoint-N/` in place, and a half-written one used to be
picked by `get_last_checkpoint` and fail every rerun."""

from __future__ import annotations

import json
import shutil

import pytest

from configs.data import ColdStartConfig, ColdStartSource
from configs.schema import SFTConfig
from data_prep import cold_start
from training.sft import build_trainer
from training.sft_checkpoints import incomplete, resume_checkpoint


@pytest.fixture(scope="module")
def trained(tiny_assets, tmp_path_factory):
    """Two real TRL checkpoints of the tiny model (steps 1 and 2)."""
    tmp = tmp_path_factory.mktemp("sft_ckpt")
    cold_start.run(ColdStartConfig(sources=[ColdStartSource(source="synthetic", examples=8)]), {}, tmp)
    parquet = tmp / "sft.parquet"
    cfg = SFTConfig(global_batch_size=4, micro_batch_per_device=4, max_seq_tokens=512, checkpoint_every_steps=1)
    trainer = build_trainer(cfg, tiny_assets.model, tiny_assets.tokenizer, parquet, tmp / "trainer", tmp, max_steps=2)
    trainer.train()
    return tmp / "trainer", cfg, parquet, tiny_assets


def _cut_tail(path, keep=0.5):  # noqa: ANN001
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize("cut", ["optimizer", "weights", "state", "rng", "scheduler_missing_tail"])
def test_a_checkpoint_cut_by_a_kill_is_set_aside_and_the_one_before_resumes(trained, tmp_path, cut):
    source, cfg, parquet, assets = trained
    trainer_dir = tmp_path / "trainer"
    shutil.copytree(source, trainer_dir)
    newest = trainer_dir / "checkpoint-2"
    assert incomplete(newest) is None and incomplete(trainer_dir / "checkpoint-1") is None
    if cut == "optimizer":
        _cut_tail(newest / "optimizer.pt")
    elif cut == "weights":
        _cut_tail(newest / "model.safetensors", 0.9)
    elif cut == "state":
        (newest / "trainer_state.json").unlink()
    elif cut == "rng":
        for f in newest.glob("rng_state*.pth"):
            f.unlink()
    else:
        _cut_tail(newest / "scheduler.pt", 0.8)
    assert resume_checkpoint(trainer_dir) == str(trainer_dir / "checkpoint-1")
    assert not newest.exists()
    (aside,) = (trainer_dir / "incomplete").iterdir()
    assert aside.name.startswith("checkpoint-2-")  # kept for a look, not deleted
    if cut == "optimizer":  # the one chosen really resumes
        trainer = build_trainer(cfg, assets.model, assets.tokenizer, parquet, trainer_dir, tmp_path, max_steps=2)
        trainer.train(resume_from_checkpoint=resume_checkpoint(trainer_dir))
        assert json.loads((trainer_dir / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2


def test_nothing_complete_means_a_fresh_start(trained, tmp_path):
    source, *_ = trained
    trainer_dir = tmp_path / "trainer"
    shutil.copytree(source, trainer_dir)
    for ckpt in trainer_dir.glob("checkpoint-*"):
        (ckpt / "trainer_state.json").write_text("{\"global_st")
    assert resume_checkpoint(trainer_dir) is None
    assert len(list((trainer_dir / "incomplete").iterdir())) == 2
    assert resume_checkpoint(tmp_path / "absent") is None
