"""Config section `eval` (SPEC §9). Owned by the evaluation package; defaults live here.

Defaults are the paper's: 16 samples at temperature 0.6, 30K tokens, 30 turns, the five
benchmarks by hub id. A benchmark `location` is a hub id, a local `.jsonl`/`.json`/
`.parquet` file, or `synthetic` (the generated held-out set of the synthetic task, the
tiny config's benchmark). Field names differ between copies of a benchmark, so each
entry names the fields it reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from configs.data import _Location, _Section
from configs.fields import operational

BenchmarkKind = Literal["math", "choice"]


class EvalBenchmark(_Location):
    name: str  # its label in reports, e.g. aime24
    kind: BenchmarkKind = "math"  # choice: multiple choice answered by letter (GPQA)
    split: str = "test"  # hub ids only
    id_field: str = "id"  # a row without it is named by its position
    problem_field: str = "problem"
    answer_field: str = "answer"  # math: the reference answer
    # choice: the correct option and the wrong ones (a list-valued field gives several)
    correct_field: str = "correct_answer"
    incorrect_fields: list[str] = ["incorrect_answers"]
    problems: int | None = Field(default=None, ge=1)  # the first N problems; None: all (synthetic: required)
    seed: int = 0  # synthetic only: the generator's seed (the decontamination set's)
    optional: bool = False  # a benchmark that cannot be loaded fails the stage, unless optional

    @model_validator(mode="after")
    def _synthetic_has_size(self) -> EvalBenchmark:
        if self.is_synthetic and self.problems is None:
            raise ValueError(f"benchmark {self.name!r}: the synthetic set is generated; set `problems`")
        if self.is_synthetic and self.kind != "math":
            raise ValueError(f"benchmark {self.name!r}: the synthetic set is kind `math`")
        return self


class LMEvalTask(_Section):
    name: str  # an lm-eval task, e.g. ifeval
    # A local copy of the task's data (JSONL/JSON/Parquet): the task then reads it instead of
    # the hub (lm-eval's own prompts and scorer are kept). None: lm-eval loads it as usual.
    data: str | None = None
    split: str | None = None  # the split the task evaluates (default: the task's test split)

    @property
    def label(self) -> str:
        """Its name in results: `<task>_local` when it reads local data."""
        return self.name if self.data is None else f"{self.name}_local"


class LMEvalConfig(_Section):
    """General abilities through lm-eval's Python API (SPEC §9), on the same checkpoint."""

    tasks: list[LMEvalTask] = []
    limit: int | None = Field(default=None, ge=1)  # first N documents per task; None: all
    max_gen_toks: int | None = Field(default=None, ge=1)  # None: the task's own
    batch_size: int = operational(8, ge=1)

    @model_validator(mode="after")
    def _unique_labels(self) -> LMEvalConfig:
        labels = [t.label for t in self.tasks]
        if len(set(labels)) != len(labels):
            raise ValueError(f"eval.lm_eval.tasks: each task once (a local copy is `<task>_local`), got {labels}")
        return self


_PAPER_BENCHMARKS = [
    EvalBenchmark(name="aime24", location="HuggingFaceH4/aime_2024", split="train"),
    EvalBenchmark(name="aime25", location="math-ai/aime25", split="test"),
    EvalBenchmark(name="hmmt25", location="MathArena/hmmt_feb_2025", split="train", id_field="problem_idx"),
    EvalBenchmark(name="math500", location="HuggingFaceH4/MATH-500", split="test", id_field="unique_id"),
    EvalBenchmark(name="gpqa_diamond", location="Idavidrein/gpqa", hub_config="gpqa_diamond", split="train",
                  kind="choice", id_field="Record ID", problem_field="Question", correct_field="Correct Answer",
                  incorrect_fields=["Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"]),
]

# SPEC §9: rStar2-Agent-14B, pass@1 in percent; shown beside ours in the comparison report.
PAPER_PASS1 = {"aime24": 80.6, "aime25": 69.8, "hmmt25": 52.7, "math500": 97.8, "gpqa_diamond": 60.9}


class EvalConfig(_Section):
    """Agentic benchmark evaluation of every checkpoint (SPEC §9)."""

    samples_per_problem: int = Field(16, ge=1)
    temperature: float = 0.6
    max_response_tokens: int = Field(30000, ge=1)
    max_turns: int = Field(30, ge=1)
    seed: int = 0  # sample j of problem i draws with the same seed whatever samples_per_problem is
    choice_seed: int = 0  # shuffles each choice problem's options (recorded per sample)
    pass_k: list[int] = [1, 4, 8, 16]  # pass@k (unbiased estimator) for each k <= samples_per_problem
    benchmarks: list[EvalBenchmark] = _PAPER_BENCHMARKS
    lm_eval: LMEvalConfig = LMEvalConfig()
    # Samples are saved after every chunk of this many trajectories: a killed evaluation
    # resumes from the last saved chunk, and a larger k reuses every sample already drawn.
    chunk_trajectories: int = operational(256, ge=1)

    @model_validator(mode="after")
    def _unique_names(self) -> EvalConfig:
        names = [b.name for b in self.benchmarks]
        if len(set(names)) != len(names):
            raise ValueError(f"eval.benchmarks: names must be unique, got {names}")
        return self
