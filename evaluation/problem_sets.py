"""The problems of one benchmark, read from a hub id, a local file or the synthetic generator.

A math problem is its text and the reference answer (math-verify compares them). A
choice problem (GPQA) is shown with its options under letters, in an order shuffled
per problem by `eval.choice_seed` and the problem's id, so the order is reproducible and
recorded with every sample; its reference is the letter of the correct option.

A row that cannot be used (unreadable, a field missing or empty, a repeated id) is
written to the rejects file with its file, row and field, and counted; it never stops
the benchmark and is never dropped silently.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from configs.eval import EvalBenchmark
from datalib.eval_texts import synthetic_eval_set
from datalib.reader import RawRow, SourceRows
from datalib.rejects import RejectLog
from rollout.answer import LetterReference
from rollout.groups import Problem

LETTERS = "ABCDEFGHIJ"
CHOICE_INSTRUCTION = "Answer with the letter of the correct option in \\boxed{}, for example \\boxed{A}."


@dataclass(frozen=True)
class EvalProblem:
    id: str
    prompt: str  # the user message
    reference: str  # math: the answer; choice: the correct letter
    choices: tuple[str, ...] = ()  # choice: the options in the order shown (A, B, ...)

    @property
    def prompt_sha(self) -> str:
        """Identity of what the model sees: the sample store and the sampling seed key on it."""
        return hashlib.sha256(self.prompt.encode()).hexdigest()[:20]

    def scoring_reference(self) -> str | LetterReference:
        return LetterReference(self.reference, LETTERS[: len(self.choices)]) if self.choices else self.reference

    @property
    def reference_key(self) -> str:
        """What a stored sample's score was computed against: a changed reference rescores it."""
        return f"letter:{self.reference}/{LETTERS[: len(self.choices)]}" if self.choices else f"math:{self.reference}"

    def to_sample(self) -> Problem:
        """The problem as the rollout runtime samples it; its samples are seeded by `prompt_sha`."""
        return Problem(self.prompt, self.scoring_reference(), seed_key=self.prompt_sha)


@dataclass
class LoadedBenchmark:
    name: str
    problems: list[EvalProblem]
    rejects: RejectLog
    label: str  # where the rows came from


def choice_prompt(question: str, options: list[str], problem_id: str,
                  choice_seed: int) -> tuple[str, tuple[str, ...], str]:
    """(prompt, shuffled options, letter of options[0]); options[0] is the correct one."""
    order = list(range(len(options)))
    random.Random(f"{choice_seed}:{problem_id}").shuffle(order)
    shown = tuple(options[i] for i in order)
    lines = [f"{LETTERS[k]}) {text}" for k, text in enumerate(shown)]
    prompt = f"{question}\n\n" + "\n".join(lines) + f"\n\n{CHOICE_INSTRUCTION}"
    return prompt, shown, LETTERS[order.index(0)]


def _text(data: dict, field: str) -> str:
    value = data.get(field)
    if isinstance(value, bool) or value is None:
        raise _Missing(field)
    if isinstance(value, int | float):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if not isinstance(value, str) or not value.strip():
        raise _Missing(field)
    return value.strip()


class _Missing(Exception):
    def __init__(self, field: str):
        super().__init__(field)
        self.field = field


def _problem(bench: EvalBenchmark, data: dict, position: int, choice_seed: int) -> EvalProblem:
    raw_id = data.get(bench.id_field)
    pid = str(raw_id) if raw_id not in (None, "") else str(position)
    question = _text(data, bench.problem_field)
    if bench.kind == "math":
        return EvalProblem(pid, question, _text(data, bench.answer_field))
    correct = _text(data, bench.correct_field)
    wrong: list[str] = []
    for field in bench.incorrect_fields:
        value = data.get(field)
        items = value if isinstance(value, list) else [value]
        wrong += [_text({field: v}, field) for v in items]
    if not wrong or len(wrong) + 1 > len(LETTERS):
        raise _Missing(",".join(bench.incorrect_fields))
    prompt, shown, letter = choice_prompt(question, [correct, *wrong], pid, choice_seed)
    return EvalProblem(pid, prompt, letter, shown)


def load_benchmark(bench: EvalBenchmark, choice_seed: int) -> LoadedBenchmark:
    """Every usable problem (the first `bench.problems`), with the rows that were not usable."""
    rejects = RejectLog()
    if bench.is_synthetic:
        problems = [EvalProblem(p.id, p.problem, str(p.answer)) for p in synthetic_eval_set(bench.problems, bench.seed)]
        return LoadedBenchmark(bench.name, problems, rejects, "synthetic")
    rows = SourceRows(bench.location, bench.hub_config, bench.split, revision=bench.revision)
    needed = (bench.problem_field,) + ((bench.answer_field,) if bench.kind == "math" else (bench.correct_field,))
    rows.check_fields(f"benchmark {bench.name}", needed)
    problems: list[EvalProblem] = []
    seen: set[str] = set()
    for raw in rows.iter():
        if bench.problems is not None and len(problems) >= bench.problems:
            break
        problem = _usable(bench, raw, rejects, choice_seed)
        if problem is None:
            continue
        if problem.id in seen:
            rejects.add(bench.name, raw, "malformed", "duplicate_id", f"{bench.id_field}={problem.id!r}")
            continue
        seen.add(problem.id)
        problems.append(problem)
    return LoadedBenchmark(bench.name, problems, rejects, rows.label)


def _usable(bench: EvalBenchmark, raw: RawRow, rejects: RejectLog, choice_seed: int) -> EvalProblem | None:
    if raw.data is None:
        rejects.add(bench.name, raw, "malformed", raw.reason or "invalid_json", raw.error)
        return None
    try:
        return _problem(bench, raw.data, raw.position, choice_seed)
    except _Missing as e:
        rejects.add(bench.name, raw, "malformed", "missing_field", f"field {e.field!r} is missing, empty or not text")
        return None
