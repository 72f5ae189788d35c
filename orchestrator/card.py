"""The card of a stage that writes none itself (assets, SFT, the RL stages): what it was
given, what it made and where to look, from its manifest, so that every artifact has a
`card.md` and the Prefect UI a `<stage>-card`. Data stages, the filter and the evaluations
write richer cards of their own, which are left alone."""

from __future__ import annotations

import json
from pathlib import Path

_SHOWN_CHARS = 120  # a config value longer than this is cut in the table


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _flat(section: dict, prefix: str = "") -> list[tuple[str, object]]:
    rows: list[tuple[str, object]] = []
    for key, value in section.items():
        if isinstance(value, dict) and value:
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def stage_card(stage: str, key: str, manifest: dict, out_dir: Path) -> str:
    lines = [f"# {stage}", "", f"Key `{key}`, made in {manifest['duration_s']:.1f} s"
             + (f" at commit `{manifest['git_commit'][:12]}`" if manifest.get("git_commit") else "") + ".", ""]
    if manifest["inputs"]:
        lines += ["## Inputs", "", "| role | artifact digest |", "|---|---|"]
        lines += [f"| {role} | `{digest[:16]}` |" for role, digest in manifest["inputs"].items()]
        lines.append("")
    if manifest["metrics"]:
        lines += ["## Metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {name} | {_cell(value)} |" for name, value in manifest["metrics"].items()]
        lines.append("")
    files = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.iterdir())
    plots = [f for f in files if f.endswith(".png")]
    lines += ["## Files", "", ", ".join(f"`{f}`" for f in files) or "_none_", ""]
    if plots:
        lines += [f"Plots: {', '.join(f'`{p}`' for p in plots)} (also shown as this stage's artifacts).", ""]
    lines += ["## Config", "", "| key | value |", "|---|---|"]
    lines += [f"| {name} | {_cell(value)} |" for section in manifest["config"].values() if isinstance(section, dict)
              for name, value in _flat(section)]
    return "\n".join(lines) + "\n"
