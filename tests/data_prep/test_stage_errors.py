"""A data stage's error reaches the terminal as one line naming the file, row and field; the
traceback goes to a log file; a full disk names the path (issue 23, point 6)."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_a_bad_source_is_one_line_on_the_terminal_with_the_traceback_in_a_file(tmp_path):
    bad = tmp_path / "toolace.jsonl"
    bad.write_text(json.dumps({"question": "a row of another dataset", "answer": "3"}) + "\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"base: {REPO / 'configs' / 'tiny.yaml'}\nrun: {{artifacts_root: {tmp_path / 'store'}}}\n"
                   f"data:\n  cold_start:\n    sources: [{{source: toolace, location: {bad}}}]\n")
    out = subprocess.run([sys.executable, "-m", "data_prep.cold_start", "--config", str(cfg)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    line = lines[0]
    assert line.startswith("error: stage cold_start: source 'toolace' at") and str(bad) in line
    assert "lack the required field(s)" in line and "'conversations'" in line
    log = Path(line.rsplit("(traceback: ", 1)[1].rstrip(")"))
    assert "SourceSchemaError" in log.read_text()
    log.unlink()


def test_a_full_disk_names_the_path(monkeypatch, capsys):
    from orchestrator import cli

    def full(*args, **kwargs):  # noqa: ANN002, ANN003
        raise OSError(errno.ENOSPC, "No space left on device", "/data/artifacts/cold_start/x/sft.parquet")

    monkeypatch.setattr(cli, "_stage_main", full)
    with pytest.raises(SystemExit) as exit_:
        cli.stage_main("cold_start", [])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: stage cold_start: no space left on the device writing "
                          "/data/artifacts/cold_start/x/sft.parquet (traceback: ")
    Path(err.rsplit("(traceback: ", 1)[1].rstrip(")")).unlink()
