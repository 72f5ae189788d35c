"""Which stages are real so far, and where a config's artifacts are.

    python -m orchestrator.status --config configs/tiny.yaml [--set sft.epochs=0.1 ...]
    python -m orchestrator.status --last-implemented
"""

from __future__ import annotations

import argparse

from configs.load import load_config
from configs.schema import PipelineConfig
from orchestrator.keys import stage_key
from orchestrator.stages import STAGES
from orchestrator.store import ArtifactRef, ArtifactStore


def last_implemented() -> str:
    """The last stage of the leading run of implemented stages."""
    last = None
    for spec in STAGES:
        if not spec.implemented:
            break
        last = spec.name
    if last is None:
        raise RuntimeError("no stage is implemented")
    return last


def stage_refs(cfg: PipelineConfig) -> dict[str, ArtifactRef | None]:
    """Each stage's committed artifact for this config (None where there is none, or upstream is missing)."""
    store = ArtifactStore(cfg.run.artifacts_root)
    refs: dict[str, ArtifactRef | None] = {}
    for spec in STAGES:
        ups = {n: refs[n] for n in spec.upstream if refs.get(n) is not None}
        refs[spec.name] = store.lookup(spec.name, stage_key(spec, cfg, ups)) if len(ups) == len(spec.upstream) \
            else None
    return refs


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.status")
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override")
    parser.add_argument("--last-implemented", action="store_true")
    args = parser.parse_args()
    if args.last_implemented:
        print(last_implemented())
        return
    refs = stage_refs(load_config(args.config, args.set))
    print(f"{'stage':<15} {'status':<52} artifact")
    for spec in STAGES:
        ref = refs[spec.name]
        status = "implemented" if spec.implemented else f"to come: {spec.delivered_by}"
        print(f"{spec.name:<15} {status:<52} {ref.uri if ref else '-'}")


if __name__ == "__main__":
    main()
