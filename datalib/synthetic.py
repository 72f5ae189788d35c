"""The synthetic tool-use task (SPEC §8): integer problems solved by running a short program.

Each problem states a few numbers and an operation whose result has 4-7 digits (NOTES.md
"Learning on CPU"): a small model cannot compute it in its head, but it can copy the
numbers into a one-to-four-line program, call the tool and copy the printed result into
`<answer>\\boxed{}</answer>`. It feeds the tiny config (SFT demonstrations, RL problems and
a held-out eval set) and the SFT/RL learning benchmark; it needs no download.

Demonstrations follow the protocol of SPEC §2 with the rollout package's system prompt and
tool schema. A configurable share (15 % by default) first calls a broken program (a
syntax error or a misspelt `print`), reads the traceback and calls the fixed program.
The tool responses are the programs' real output: each program runs here, in-process (it
is ours, never model code), as `main.py` with the traceback cut to the user's frames, the
way the sandbox reports it (sandbox/runner.py), and the printed answer is checked.

Problem texts keep every run of 8 words within reach of at least one drawn number, so
8-gram decontamination against the eval set flags only genuinely shared numbers.
"""

from __future__ import annotations

import functools
import io
import linecache
import random
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from datalib.records import FunctionCall, Message
from rollout.prompt import SYSTEM_PROMPT, TOOL_SCHEMA
from sandbox.runner import USER_FILE
from sandbox.tool_call import TOOL_NAME

ANSWER_RANGE = (1_000, 9_999_999)  # 4-7 digits (NOTES.md)
FAILURE_KINDS = ("syntax", "name")

FIRST_REASON = "<reason>I will write a program to compute it.</reason>"
FIX_REASON = "<reason>The program failed with {error}. I will fix it and run it again.</reason>"
FINAL_TURN = "<reason>The program printed {answer}.</reason>\n<answer>The answer is \\boxed{{{answer}}}.</answer>"


@dataclass(frozen=True)
class SyntheticProblem:
    id: str
    family: str
    problem: str
    answer: int
    program: str  # prints exactly `answer`


def _mul_add(r: random.Random) -> tuple[str, str]:
    a, b, c = r.randint(100, 9999), r.randint(10, 999), r.randint(1, 999)
    return f"a = {a}, b = {b}, c = {c}. Compute a * b + c.", f"a = {a}\nb = {b}\nc = {c}\nprint(a * b + c)"


def _range_sum(r: random.Random) -> tuple[str, str]:
    lo = r.randint(1, 999)
    hi = r.randint(lo + 50, 4000)
    return f"Sum the integers from {lo} to {hi}.", f"print(sum(range({lo}, {hi} + 1)))"


def _pow_mod(r: random.Random) -> tuple[str, str]:
    x, k, m = r.randint(2, 999), r.randint(5, 99), r.randint(10_000, 9_999_999)
    return f"Compute {x} ** {k} mod {m}.", f"print(pow({x}, {k}, {m}))"


def _square_sum(r: random.Random) -> tuple[str, str]:
    x, y = r.randint(32, 2999), r.randint(32, 2999)
    return f"Compute {x} squared plus {y} squared.", f"print({x} ** 2 + {y} ** 2)"


def _count_multiples(r: random.Random) -> tuple[str, str]:
    n, d = r.randint(10_000, 1_000_000), r.randint(2, 40)
    e = r.choice([v for v in range(2, 41) if v != d])
    text = f"How many integers from 1 to {n} are divisible by {d} or {e}?"
    return text, f"import math\nn = {n}\nprint(n // {d} + n // {e} - n // math.lcm({d}, {e}))"


def _diff_squares(r: random.Random) -> tuple[str, str]:
    a = r.randint(1000, 9999)
    b = r.randint(10, a - 1)
    return f"a = {a}, b = {b}. Compute (a + b) * (a - b).", f"a = {a}\nb = {b}\nprint((a + b) * (a - b))"


FAMILIES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "mul_add": _mul_add, "range_sum": _range_sum, "pow_mod": _pow_mod,
    "square_sum": _square_sum, "count_multiples": _count_multiples, "diff_squares": _diff_squares,
}


_PROGRAM_LOCK = threading.Lock()  # linecache holds one USER_FILE: stages side by side take turns


def run_program(code: str) -> tuple[bool, str]:
    """(ran without error, feedback text) for one of our own programs, as the sandbox shows it.

    Their `print` writes to a buffer of their own, not to the process's stdout, which a stage
    running beside this one in the same process may be writing to."""
    out = io.StringIO()
    with _PROGRAM_LOCK:
        # The sandbox registers the source the same way, so tracebacks quote the failing line.
        linecache.cache[USER_FILE] = (len(code), None, code.splitlines(True), USER_FILE)
        try:
            compiled = compile(code, USER_FILE, "exec")
            exec(compiled, {"__name__": "__main__", "__file__": USER_FILE, "print": functools.partial(print, file=out)})
        except Exception as exc:  # noqa: BLE001 - the failure is the demonstration's content
            te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
            te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == USER_FILE])
            return False, (out.getvalue() + "".join(te.format())).rstrip("\n")
    return True, out.getvalue().rstrip("\n")


def generate_problems(n: int, seed: int, stream: str) -> list[SyntheticProblem]:
    """`n` distinct problems; `stream` separates the sets (sft, rl-0, eval, ...)."""
    rng = random.Random(f"{stream}:{seed}")  # str seeds hash with sha512: stable across runs
    names = sorted(FAMILIES)
    seen: set[str] = set()
    out: list[SyntheticProblem] = []
    while len(out) < n:
        family = names[len(out) % len(names)]
        text, program = FAMILIES[family](rng)
        ok, printed = run_program(program)
        if not ok:
            raise RuntimeError(f"synthetic {family} program failed: {printed}")
        answer = int(printed)
        if text in seen or not ANSWER_RANGE[0] <= answer <= ANSWER_RANGE[1]:
            continue
        seen.add(text)
        out.append(SyntheticProblem(f"{stream}-{len(out)}", family, text, answer, program))
    return out


def broken_program(program: str, kind: str) -> str:
    lines = program.splitlines()
    if kind == "syntax":  # the closing parenthesis of the print is missing
        lines[-1] = lines[-1][:-1]
    else:  # a misspelt builtin
        lines[-1] = lines[-1].replace("print(", "prnt(", 1)
    return "\n".join(lines)


def failure_kind(problem_id: str, seed: int, fraction: float) -> str:
    """'' or the kind of broken first call; a pure function of the problem and the seed."""
    r = random.Random(f"fail:{problem_id}:{seed}")
    return r.choice(FAILURE_KINDS) if r.random() < fraction else ""


def _call(code: str) -> FunctionCall:
    return FunctionCall(TOOL_NAME, {"code": code, "input": ""})


def demonstration(problem: str, answer: int, program: str, failure: str) -> list[Message]:
    """SPEC §2 conversation solving `problem`; `failure` ('' or a kind) breaks the first call."""
    messages = [Message("system", SYSTEM_PROMPT), Message("user", problem)]
    if failure:
        ok, feedback = run_program(broken_program(program, failure))
        if ok:
            raise RuntimeError(f"the broken program ran: {program!r}")
        error = feedback.splitlines()[-1].split(":")[0]
        messages += [Message("assistant", FIRST_REASON, (_call(broken_program(program, failure)),)),
                     Message("tool", feedback),
                     Message("assistant", FIX_REASON.format(error=error), (_call(program),))]
    else:
        messages.append(Message("assistant", FIRST_REASON, (_call(program),)))
    ok, printed = run_program(program)
    if not ok or printed != str(answer):
        raise RuntimeError(f"the program of {problem!r} printed {printed!r}, not {answer}")
    messages += [Message("tool", printed), Message("assistant", FINAL_TURN.format(answer=answer))]
    return messages


def tools() -> tuple[dict, ...]:
    return (TOOL_SCHEMA,)
