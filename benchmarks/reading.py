"""Benchmark of reading local sources (issue 23, point 7): speed and peak memory, against a revision.

    python -m benchmarks.reading [--rows 24000] [--against HEAD~1]

For each kind of file (JSON lines, one JSON array, gzip JSON lines, Parquet) it writes two
files of 2 KB rows, one a quarter of the other, and reads each whole twice (file order, then
the seeded order of a capped mixture) in a fresh process. That process reports its CPU
seconds and the peak of its resident memory above what it held after the imports (VmHWM).
A reader that streams has the same peak for both files; one that holds the file does not.

`--against REV` does the same with the `datalib/` of git revision REV (the tree `git archive`
gives, in a temporary folder), in the same run, and prints the ratios.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks.revision import tree_at
from stagekit.paths import REPO_ROOT

KINDS = ("jsonl", "json", "jsonl.gz", "parquet")

_READ = textwrap.dedent("""
    import re, sys, time
    from datalib.reader import SourceRows

    def peak():  # VmHWM, unlike ru_maxrss, starts afresh at exec: the parent's memory does not count
        return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

    before, start = peak(), time.process_time()
    rows = SourceRows(sys.argv[1], columns=["id", "text"])
    seen = sum(1 for r in rows.iter(seed=None if sys.argv[2] == "file" else 1) if r.data is not None)
    arrow = sys.modules.get("pyarrow")  # what Arrow's pool held at most, whatever the allocator keeps resident
    print(seen, time.process_time() - start, peak() - before,
          arrow.default_memory_pool().max_memory() / 2**20 if arrow else 0.0)
""")


def write_rows(path: Path, kind: str, n: int) -> None:
    """n rows of about 2 KB each, as a file of `kind`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = "word " * 400
    rows = [{"id": k, "text": f"{k} {text}"} for k in range(n)]
    if kind == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1000, compression="none")
    elif kind == "json":
        path.write_text(json.dumps(rows))
    else:
        lines = "".join(json.dumps(r) + "\n" for r in rows).encode()
        path.write_bytes(gzip.compress(lines, compresslevel=1) if kind.endswith(".gz") else lines)


def read_in_fresh_process(path: Path, order: str, tree: Path = REPO_ROOT) -> tuple[int, float, float, float]:
    """(readable rows seen, CPU seconds, peak MiB above the imports, peak MiB of Arrow's memory
    pool) of opening the source and reading every row once, in file order (`order="file"`) or in
    a seeded order ("seeded")."""
    out = subprocess.run([sys.executable, "-c", _READ, str(path), order], cwd=tree, capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin"})
    seen, cpu, mib, arrow = out.stdout.split()
    return int(seen), float(cpu), float(mib), float(arrow)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reading")
    parser.add_argument("--rows", type=int, default=24_000, help="rows of the larger file (the smaller has 1/4)")
    parser.add_argument("--against", metavar="REV", help="also read with the datalib/ of this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {"this checkout": REPO_ROOT}
        if args.against:
            (tmp / "old").mkdir()
            trees[args.against] = tree_at(args.against, tmp / "old")
        sizes = (args.rows // 4, args.rows)
        print("rows of ~2 KB, read once in a fresh process, in file order or in a seeded order; "
              "peak = resident memory above the imports")
        for kind in KINDS:
            results = {}
            for n in sizes:
                path = tmp / f"rows{n}.{kind}"
                write_rows(path, kind, n)
                mb = path.stat().st_size / 2**20
                for name, tree in trees.items():
                    for order in ("file", "seeded"):
                        seen, cpu, peak, _ = read_in_fresh_process(path, order, tree)
                        assert seen == n, (name, kind, order, seen)
                        results[name, n, order] = (cpu, peak)
                        print(f"{kind:8} {n:>6} rows ({mb:4.1f} MiB on disk) {order:6} {name:>13}: "
                              f"{n / cpu:>8,.0f} rows/s (CPU), peak {peak:6.1f} MiB")
            for name in trees:
                growth = max(results[name, sizes[1], o][1] - results[name, sizes[0], o][1] for o in ("file", "seeded"))
                print(f"{kind:8} {name:>13}: peak grows {growth:6.1f} MiB from {sizes[0]} to {sizes[1]} rows")
            if args.against:
                for order in ("file", "seeded"):
                    new, old = results["this checkout", sizes[1], order], results[args.against, sizes[1], order]
                    print(f"{kind:8} {order:6} at {sizes[1]} rows, this checkout against {args.against}: speed ratio "
                          f"{old[0] / new[0]:.2f}, peak ratio {new[1] / max(old[1], 0.1):.2f}")


if __name__ == "__main__":
    main()
