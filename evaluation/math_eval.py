"""PLACEHOLDER for stage `evaluation`: not implemented yet (see pipeline/stages.py, delivered_by).

Running it fails at once with a message naming the issue that delivers it:
    python -m evaluation.math_eval --config configs/tiny.yaml
"""

from __future__ import annotations


def main() -> None:
    from pipeline.cli import stage_main

    stage_main("evaluation")


if __name__ == "__main__":
    main()
