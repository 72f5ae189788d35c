"""Config section `data` (SPEC §8). Owned by the data_prep package; defaults live here.

The defaults are the TINY setup: every source is the generated synthetic task, so a
fresh clone runs the data stages offline in seconds. The paper's mixture (hub ids and
sizes) is set in configs/rstar2_agent_14b.yaml.

A source `location` is one of: `synthetic` (generated, no download), a local file or
directory (`.jsonl`, `.json`, `.parquet`; relative paths resolve against the repository
root) or a Hugging Face dataset id loaded with `datasets.load_dataset`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from configs.fields import operational

# Registry keys of datalib.sources (one normaliser per source format).
ColdStartSourceName = Literal[
    "toolace", "apigen_mt", "glaive_fc_v2", "magicoder_oss", "magicoder_evol", "tulu3", "nemotron_chat",
    "synthetic",
]
RLSourceName = Literal["dapo_math", "openmathreasoning", "project_euler", "synthetic"]
RewriteMode = Literal["response", "prompt"]

_LONGEST_INT64_DIGITS = 18  # answers are stored as int64 in problems.parquet


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)  # defaults typed as if loaded: same key


class _Location(_Section):
    location: str = "synthetic"  # `synthetic`, a local path or a hub id (see module docstring)
    hub_config: str | None = None  # `name=` of load_dataset; hub ids only
    split: str = "train"  # hub ids only
    # Hub ids only: a commit sha, tag or branch passed to load_dataset. The stage key records
    # it (resolved to a commit when the hub is reachable); pin a commit for keys that do
    # not depend on being online.
    revision: str | None = None

    @property
    def is_synthetic(self) -> bool:
        return self.location == "synthetic"

    def _check_synthetic(self, source: str, count_field: str) -> None:
        if (source == "synthetic") != self.is_synthetic:
            raise ValueError(f"source {source!r} with location {self.location!r}: the location `synthetic` "
                             "goes with the source `synthetic` only")
        if source == "synthetic" and getattr(self, count_field) is None:
            raise ValueError(f"the synthetic source is generated: set `{count_field}`")


class ColdStartSource(_Location):
    source: ColdStartSourceName = "synthetic"
    # A source left with no row after reading and normalising fails the stage, unless optional.
    optional: bool = False
    examples: int | None = Field(default=None, ge=1)  # how many to keep after normalising; None: all

    @model_validator(mode="after")
    def _synthetic_consistent(self) -> ColdStartSource:
        self._check_synthetic(self.source, "examples")
        return self


class RewriteConfig(_Section):
    """Optional rewriting by an OpenAI-compatible endpoint (SPEC §8: o4-mini in the paper)."""

    endpoint_url: str | None = None  # e.g. https://api.openai.com/v1; None: rewriting is off
    model: str = "o4-mini"
    api_key_env: str = operational("OPENAI_API_KEY")  # name of the environment variable, never the key
    modes: dict[ColdStartSourceName, RewriteMode] = {"tulu3": "response", "nemotron_chat": "prompt"}
    max_concurrent_requests: int = operational(8, ge=1)
    timeout_s: float = operational(120.0)  # one request


class ColdStartConfig(_Section):
    """Cold-start SFT mixture (SPEC §8 table 1)."""

    sources: list[ColdStartSource] = [ColdStartSource(source="synthetic", examples=1000)]
    seed: int = 0  # row sampling order and the synthetic generator
    synthetic_failed_first_call_fraction: float = Field(default=0.15, ge=0.0, le=1.0)
    rewrite: RewriteConfig = RewriteConfig()
    card_examples_per_source: int = 3  # rendered examples shown in the data card


class RLSource(_Location):
    source: RLSourceName = "synthetic"
    # A source left with no row after reading and normalising fails the stage, unless optional.
    optional: bool = False
    problems: int | None = Field(default=None, ge=1)  # cap after normalising (seeded); None: all
    agreement_filter: bool = False  # SPEC §8: true for OpenMathReasoning in the paper config

    @model_validator(mode="after")
    def _synthetic_consistent(self) -> RLSource:
        self._check_synthetic(self.source, "problems")
        return self


class AgreementFilterConfig(_Section):
    """Keep a problem when >= `min_agreeing` of the filter model's answers equal its label."""

    enabled: bool = True
    model: str | None = None  # hub id / path; None: the model of the `assets` artifact
    tokenizer: str | None = None  # None: the model's (or the assets artifact's) tokenizer
    # SGLang servers serving the filter model (they are started with their model); empty:
    # `rollout.sglang_urls`. Unused by the local `hf` engine, which loads `model` itself.
    sglang_urls: list[str] = operational([])
    samples_per_problem: int = Field(default=4, ge=1)  # paper: 16
    min_agreeing: int = Field(default=2, ge=1)  # paper: 2
    max_turns: int = Field(default=2, ge=1)
    max_response_tokens: int = Field(default=48, ge=1)
    temperature: float = 1.0
    seed: int = 0

    @model_validator(mode="after")
    def _reachable(self) -> AgreementFilterConfig:
        if self.min_agreeing > self.samples_per_problem:
            raise ValueError(
                f"agreement.min_agreeing ({self.min_agreeing}) exceeds agreement.samples_per_problem "
                f"({self.samples_per_problem}): no problem could pass"
            )
        return self


class RLCurationConfig(_Section):
    """RL problems with integer answers (SPEC §8 table 2)."""

    # The 8 filtered synthetic problems exercise the agreement filter (and the rollout
    # runtime) in tiny; the other 256 bypass it so the tiny RL set is never empty. Each
    # synthetic entry draws its own problems (the generator is salted by list position).
    sources: list[RLSource] = [
        RLSource(source="synthetic", problems=256),
        RLSource(source="synthetic", problems=8, agreement_filter=True),
    ]
    max_answer_digits: int = Field(default=_LONGEST_INT64_DIGITS, ge=1)  # longer answers are dropped
    seed: int = 0
    agreement: AgreementFilterConfig = AgreementFilterConfig()
    card_examples_per_source: int = 2  # problems shown in the data card

    @model_validator(mode="after")
    def _fits_int64(self) -> RLCurationConfig:
        if self.max_answer_digits > _LONGEST_INT64_DIGITS:
            raise ValueError(
                f"max_answer_digits ({self.max_answer_digits}) > {_LONGEST_INT64_DIGITS}: answers are stored as int64"
            )
        return self


class BenchmarkSource(_Location):
    name: str  # label in the report, e.g. aime24
    text_fields: list[str] = ["problem"]  # indexed separately; a list-valued field indexes each item
    split: str = "test"
    # A benchmark that cannot be loaded fails the stage, unless it is optional: then it is
    # skipped and the card says so (for local copies that only some machines have).
    optional: bool = False


class DecontaminateConfig(_Section):
    """8-gram decontamination of the RL problems against the benchmarks (SPEC §8)."""

    ngram_words: int = Field(default=8, ge=1)
    # Tiny: the generated held-out synthetic eval set (the set tiny evaluation scores). No
    # default names a path outside the repository; add the real benchmarks by hub id (paper
    # config) or by a local path (e.g. `--set` or a YAML of your own).
    benchmarks: list[BenchmarkSource] = [BenchmarkSource(name="synthetic_eval", location="synthetic")]
    synthetic_eval_problems: int = Field(default=200, ge=1)  # size of the generated held-out set
    synthetic_eval_seed: int = 0
    card_examples_per_benchmark: int = 3  # removed problems shown in the data card


class DataConfig(_Section):
    cold_start: ColdStartConfig = ColdStartConfig()
    rl_curation: RLCurationConfig = RLCurationConfig()
    decontaminate: DecontaminateConfig = DecontaminateConfig()
