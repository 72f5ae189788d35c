"""Print one problem's samples as readable text: the trajectory, the answer and its score.

    python -m evaluation.show OUT/samples/aime24.parquet                  # list problems with their pass rate
    python -m evaluation.show OUT/samples/aime24.parquet --problem ID     # every sample of one problem
    python -m evaluation.show OUT/samples/aime24.parquet --problem ID --sample 3
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd


def render(df: pd.DataFrame, problem: str, sample: int | None = None) -> str:
    rows = df[df["problem_id"].astype(str) == problem]
    if sample is not None:
        rows = rows[rows["sample"] == sample]
    if rows.empty:
        raise KeyError(f"no sample of problem {problem!r}" + (f" with index {sample}" if sample is not None else ""))
    out = []
    for _, r in rows.sort_values("sample").iterrows():
        choices = list(r["choices"]) if r["choices"] is not None else []
        answer = r["answer"] if isinstance(r["answer"], str) else "(none)"
        out.append(
            f"===== problem {problem}, sample {r['sample']} (seed {r['seed']}) =====\n"
            f"reference: {r['reference']}" + (f"   options: {choices}" if choices else "") + "\n"
            f"answer: {answer}   score: {r['score']:g}   response tokens: {r['response_tokens']}   "
            f"turns: {r['num_turns']}   finish: {r['finish_reason']}   tool calls: {list(r['tool_statuses'])}\n"
            f"----- trajectory -----\n{r['text']}\n")
    return "\n".join(out)


def summary(df: pd.DataFrame) -> str:
    g = df.groupby("problem_id", sort=False)["score"].agg(["mean", "count"])
    return "problem_id\tpass rate\tsamples\n" + "\n".join(f"{pid}\t{m:.2f}\t{n}" for pid, (m, n) in g.iterrows())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evaluation.show")
    parser.add_argument("samples", help="a samples/<benchmark>.parquet of an evaluation")
    parser.add_argument("--problem", help="problem id")
    parser.add_argument("--sample", type=int, help="one sample index")
    args = parser.parse_args(argv)
    df = pd.read_parquet(args.samples)
    try:
        print(render(df, args.problem, args.sample) if args.problem else summary(df))
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
