"""PLACEHOLDER for stage `sft`: not implemented yet (see pipeline/stages.py, delivered_by).

Running it fails at once with a message naming the issue that delivers it:
    python -m training.sft --config configs/tiny.yaml
"""

from __future__ import annotations


def main() -> None:
    from pipeline.cli import stage_main

    stage_main("sft")


if __name__ == "__main__":
    main()
