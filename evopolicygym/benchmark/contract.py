"""The Benchmark contract: the protocols a Benchmark implements and the values it trades.

A Benchmark owns deterministic Episode planning per split and seed,
Environment construction, action validation, scoring with a direction, and the
public Feedback. EpisodeSpecs are Host-private: they never reach a policy or
an Agent.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

__all__ = [
    "FAILURE_STATUSES",
    "SUMMARY_TERMINATION",
    "Artifact",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "Environment",
    "EpisodeRecord",
    "EpisodeSpec",
    "Feedback",
    "InvalidAction",
    "Step",
    "StepResult",
    "canonical_digest",
]

ScoreDirection = Literal["maximize", "minimize"]
EpisodeStatus = Literal[
    "ok", "exception", "timeout", "invalid_action", "protocol_error", "resource_limit"
]
FAILURE_STATUSES: tuple[str, ...] = (
    "exception",
    "timeout",
    "invalid_action",
    "protocol_error",
    "resource_limit",
)
# The key of an Episode summary naming why the Episode ended (a Benchmark-defined word such as
# reached_goal, truncated (cut at the step limit), fell, collided, crashed, terminated). A
# policy that missed its deadline is ``policy_timeout``, another thing.
SUMMARY_TERMINATION = "termination"


class InvalidAction(Exception):
    """Raised by ``validate_action`` (or an Environment) for an action outside the action space."""


class BenchmarkError(Exception):
    """A trusted fault in a Benchmark or Environment; it aborts the Evaluation."""


def canonical_digest(value: Any) -> str:
    """``sha256:<hex>`` over canonical JSON (sorted keys, no whitespace) of ``value``."""
    raw = msgspec.json.encode(value, order="sorted")
    return "sha256:" + hashlib.sha256(b"evopolicygym:canonical-json:v1\x00" + raw).hexdigest()


class BenchmarkSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The public description of a Benchmark; Agents and policies may see all of it."""

    id: str
    description: str
    observation_space: Any
    action_space: Any
    max_episode_steps: int
    primary_metric: str = "mean_return"
    score_direction: ScoreDirection = "maximize"
    # What a failed Episode (any failure class) scores: a bound no completed Episode can
    # fall below (rise above, when minimizing), so failing never pays. None: not declared,
    # and the Benchmark is not evaluated until it is.
    failure_score: float | None = None
    metadata: dict[str, Any] = {}
    environment_parameters: dict[str, Any] = {}

    def __post_init__(self) -> None:
        score = self.failure_score
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, float | int)
            or not math.isfinite(score)
        ):
            raise BenchmarkError(f"failure_score must be a finite number, got {score!r}")

    @property
    def environment_digest(self) -> str:
        """Identifies the Environment family, its parameters and the scoring of failures, so
        scores compare like with like."""
        return canonical_digest(
            {
                "id": self.id,
                "environment_parameters": self.environment_parameters,
                "failure_score": self.failure_score,
            }
        )


class EpisodeSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Trusted, Host-private inputs of one Episode."""

    split: str
    index: int
    seed: int
    scenario: dict[str, Any] = {}


class StepResult(msgspec.Struct, frozen=True):
    observation: Any
    reward: float
    terminated: bool
    truncated: bool


class Step(msgspec.Struct, frozen=True):
    """One recorded transition of a trace."""

    action: Any
    reward: float
    terminated: bool
    truncated: bool
    observation: Any


class EpisodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What happened in one Episode, as the Host saw it (the spec stays Host-side)."""

    spec: EpisodeSpec
    policy_seed: int
    status: EpisodeStatus
    total_reward: float
    steps: int
    terminated: bool = False
    truncated: bool = False
    failure: str | None = None
    stderr_tail: str = ""
    duration_s: float = 0.0
    initial_observation: Any = None
    trace: list[Step] | None = None
    # Benchmark-defined public facts of the Episode from its Environment's ``summary()``
    # (``termination``: why it ended, e.g. reached_goal, truncated, fell; family fields such
    # as steps_to_key). Empty when the Environment offers none or the Episode failed early.
    summary: dict[str, Any] = {}


class Artifact(msgspec.Struct, frozen=True, kw_only=True):
    """Feedback bytes. ``bulk`` artifacts may be pruned by retention; ``permanent`` never are."""

    name: str
    media_type: str
    data: bytes
    retention: Literal["permanent", "bulk"] = "bulk"


class Feedback(msgspec.Struct, frozen=True, kw_only=True):
    """A finite scalar score, public content, and artifacts."""

    score: float
    content: dict[str, Any] = {}
    artifacts: tuple[Artifact, ...] = ()

    def __post_init__(self) -> None:
        if (
            isinstance(self.score, bool)
            or not isinstance(self.score, float | int)
            or not math.isfinite(self.score)
        ):
            raise BenchmarkError(f"feedback score must be a finite number, got {self.score!r}")


@runtime_checkable
class Environment(Protocol):
    """One Episode's environment, created fresh in the Host for each Episode."""

    def reset(self) -> Any:
        """Start the Episode (seeded from its EpisodeSpec) and return the first observation."""
        ...

    def step(self, action: Any) -> StepResult: ...

    def close(self) -> None: ...

    # Optional (not part of the protocol check): ``summary() -> dict`` of PolicyValues, the
    # Episode's domain facts, asked once after its last step and before ``close()``; it lands
    # in ``EpisodeRecord.summary`` for ``Benchmark.score`` to publish. See SUMMARY_TERMINATION.


@runtime_checkable
class Benchmark(Protocol):
    """What the Host needs from a Benchmark. Must be picklable for parallel evaluation."""

    @property
    def spec(self) -> BenchmarkSpec: ...

    @property
    def splits(self) -> tuple[str, ...]: ...

    def plan(self, split: str, seed: int, count: int) -> list[EpisodeSpec]:
        """Deterministic Episodes for ``split``: the same arguments give the same list."""
        ...

    def make_environment(self, episode: EpisodeSpec) -> Environment: ...

    def validate_action(self, action: Any) -> Any:
        """Return the action as the Environment takes it, or raise InvalidAction. Never clip."""
        ...

    def sample_action(self, rng: random.Random) -> Any:
        """A valid random action (used by conformance checks and random baselines)."""
        ...

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        """Public Feedback for the Episodes, in order; must not reveal EpisodeSpecs."""
        ...
