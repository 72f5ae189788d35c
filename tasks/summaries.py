"""Markdown shown in the Prefect UI for a stage's artifact."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path


def artifact_key(stage: str, kind: str) -> str:
    # Prefect artifact keys must match ^[a-z0-9-]*$ (NOTES.md).
    return f"{stage}-{kind}".replace("_", "-").lower()


def manifest_markdown(manifest: dict) -> str:
    metrics = manifest.get("metrics") or {}
    rows = "\n".join(f"| {k} | {v} |" for k, v in sorted(metrics.items())) or "| (none) | |"
    inputs = "\n".join(f"- `{k}`: `{v[:16]}…`" for k, v in manifest.get("inputs", {}).items()) or "- (none)"
    inputs += "".join(f"\n- hub dataset `{k}` @ `{v}`" for k, v in (manifest.get("datasets") or {}).items())
    libraries = ", ".join(f"{k} {v}" for k, v in ((manifest.get("code") or {}).get("libraries") or {}).items())
    return (
        f"# Stage `{manifest['stage']}`\n\n"
        f"- digest: `{manifest['digest']}`\n- key: `{manifest['key']}`\n"
        f"- config hash: `{manifest.get('config_hash')}`\n- code version: `{manifest.get('code_version')}`"
        f" ({libraries or 'no result-shaping library'})\n"
        f"- git commit: `{manifest.get('git_commit')}`\n- created: {manifest.get('created_at')}\n"
        f"- duration: {manifest.get('duration_s')} s\n\n## Inputs\n{inputs}\n\n"
        f"## Metrics\n| metric | value |\n|---|---|\n{rows}\n\n"
        f"<details><summary>config</summary>\n\n```json\n{json.dumps(manifest.get('config'), indent=2)}\n```\n"
        f"</details>\n"
    )


def image_data_url(png: Path) -> str:
    # Image artifacts take a URL the browser fetches; the artifact store may be a local
    # path the browser cannot read, so the PNG travels inside the URL.
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()


def csv_table(path: Path, max_rows: int = 200) -> list[dict]:
    """The CSV's rows, evenly thinned to at most `max_rows` (first and last kept)."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    if len(rows) <= max_rows:
        return rows
    picks = sorted({round(i * (len(rows) - 1) / (max_rows - 1)) for i in range(max_rows)})
    return [rows[i] for i in picks]
