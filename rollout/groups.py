"""What `RolloutRuntime.sample_and_score` takes and returns (SPEC §2, §5).

A `Problem` is the user's text, the reference a correct answer must match, and the key
its samples are seeded by. The call returns one `ScoredGroup` per problem, in order:
every trajectory drawn for it (failed ones included, with reward None), each carrying
its reward, verification status and the status of every tool call it made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rollout.metrics import Outcome
from rollout.reward import Reference
from rollout.trajectory import Trajectory


@dataclass(frozen=True)
class Problem:
    text: str  # the user turn
    # A string is compared by math-verify, a LetterReference by letter (GPQA), an
    # IntegerReference by the integer rules of rollout.answer (RL curation's agreement filter).
    reference: Reference
    # Sample j draws with trajectory_seed(settings.seed, key, j): a key that names the problem
    # (evaluation uses a digest of its prompt) keeps a sample the same whatever else is drawn
    # with it. None: the problem's index in the call.
    seed_key: str | None = None


@dataclass
class ScoredGroup(Sequence[Trajectory]):
    problem_index: int  # position in the call's problem list
    problem: Problem
    trajectories: list[Trajectory] = field(default_factory=list)  # in sample order, failed ones included

    # A group reads as the sequence of its trajectories (len, iteration, indexing, index).
    def __len__(self) -> int:
        return len(self.trajectories)

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.trajectories)

    def __getitem__(self, index):  # noqa: ANN001, ANN204 - int or slice, as a list's
        return self.trajectories[index]

    @property
    def scored(self) -> list[Trajectory]:
        """The trajectories that finished and were scored (failed ones are incomplete)."""
        return [t for t in self.trajectories if not t.failed]

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.trajectories)

    @property
    def solved(self) -> int:
        """Scored trajectories with reward > 0."""
        return sum(t.reward > 0 for t in self.scored)

    def outcomes(self) -> list[Outcome]:
        return [t.outcome() for t in self.scored]


class ScoredGroups(list[ScoredGroup]):
    """One group per problem of the call, plus where the time went and what failed."""

    def __init__(self, groups: list[ScoredGroup], rollout_s: float = 0.0, verification_s: float = 0.0) -> None:
        super().__init__(groups)
        self.rollout_s = rollout_s  # wall clock of generation and tool calls (they interleave)
        self.verification_s = verification_s  # wall clock of answer verification

    def trajectories(self) -> Iterator[Trajectory]:
        return (t for g in self for t in g.trajectories)

    def scored(self) -> list[Trajectory]:
        return [t for g in self for t in g.scored]

    def outcomes(self) -> list[list[Outcome]]:
        """One list of scored outcomes per problem: what rollout.metrics computes on."""
        return [g.outcomes() for g in self]

    @property
    def failed(self) -> int:
        """Trajectories recorded as failed (no engine answered a turn within the retries)."""
        return sum(g.failed for g in self)

    @property
    def failures(self) -> Counter[str]:
        """How many trajectories failed for each reason."""
        return Counter(t.failure for t in self.trajectories() if t.failure is not None)

    @property
    def engine_retries(self) -> int:
        """Generation requests that failed and were retried or given up, over all trajectories."""
        return sum(t.engine_attempts for t in self.trajectories())

    @property
    def call_statuses(self) -> Counter[str]:
        """How many tool calls ended with each status (ok, error, timeout, invalid_call, resource_limit)."""
        return Counter(c.status for t in self.trajectories() for c in t.tool_calls)
