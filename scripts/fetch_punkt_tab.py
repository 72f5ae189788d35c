"""Put NLTK's English `punkt_tab` (which lm-eval's IFEval scorer needs) in <venv>/nltk_data.

NLTK downloads it from GitHub, which machines that reach only the package registries
cannot; the `llama-index-core` wheel on PyPI carries the same files (NOTES.md,
"lm-eval offline"). Only the English tables (4 files, 237 KB) are extracted.

    python scripts/fetch_punkt_tab.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "llama-index-core==0.14.25"
INSIDE = "llama_index/core/_static/nltk_cache/tokenizers/punkt_tab/english/"


def main() -> None:
    dest = Path(sys.prefix) / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    if (dest / "ortho_context.tab").exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith(INSIDE) and not name.endswith("/"):
                    (dest / name[len(INSIDE):]).write_bytes(z.read(name))
    print(f"punkt_tab (english) in {dest}")


if __name__ == "__main__":
    main()
