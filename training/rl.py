"""PLACEHOLDER for the RL stages `rl_stage1`, `rl_stage2`, `rl_stage3`: not implemented yet.

Running it fails at once with a message naming the issue that delivers it:
    python -m training.rl --stage rl_stage1 --config configs/tiny.yaml
"""

from __future__ import annotations

import sys


def main() -> None:
    from pipeline.cli import stage_main

    stage = sys.argv[sys.argv.index("--stage") + 1] if "--stage" in sys.argv else "rl_stage1"
    stage_main(stage)


if __name__ == "__main__":
    main()
