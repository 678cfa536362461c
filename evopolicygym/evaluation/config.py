"""Evaluation settings and results: typed, serializable, shared by the engine and the CLI."""

from __future__ import annotations

from typing import Any

import msgspec

from evopolicygym.benchmark import Benchmark, BenchmarkError, EpisodeRecord, EpisodeSpec, Feedback
from evopolicygym.evaluation.sandbox import ResourceLimits
from evopolicygym.seeds import derive_seed

__all__ = [
    "EpisodeSummary",
    "EvaluationConfig",
    "EvaluationError",
    "EvaluationResult",
    "PlannedEpisode",
    "plan_episodes",
    "require_failure_score",
]


class EvaluationError(Exception):
    """A trusted fault (Environment, Benchmark or the Host's own machinery); the Evaluation is
    aborted."""


class EvaluationConfig(msgspec.Struct, frozen=True, kw_only=True):
    split: str = "train"
    episodes: int = 8
    seed: int = 0
    jobs: int | None = None  # None: one per available CPU
    episode_timeout: float = 30.0  # seconds of policy time per Episode: start-up plus every act()
    limits: ResourceLimits = ResourceLimits()
    output_tail_bytes: int = 8192
    trace_steps: int = 200  # steps kept per Episode for the step-trace artifact; 0 keeps none
    pin_cpus: bool = (
        True  # an Episode's Host loop and its policy share one core: cheaper round trips
    )

    def __post_init__(self) -> None:
        if self.episodes < 0:
            raise ValueError("episodes must be >= 0")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError("jobs must be >= 1")
        if not 0 < self.episode_timeout <= 86_400:
            raise ValueError(
                f"episode_timeout must be in (0, 86400] seconds, got {self.episode_timeout}"
            )
        if not 0 <= self.output_tail_bytes <= 1 << 20:
            raise ValueError("output_tail_bytes must be between 0 and 1 MiB")
        if not 0 <= self.trace_steps <= 1_000_000:
            raise ValueError("trace_steps must be between 0 and 1,000,000")


class PlannedEpisode(msgspec.Struct, frozen=True):
    """An Episode to run: the Host-private spec and the policy seed."""

    spec: EpisodeSpec
    policy_seed: int


def require_failure_score(benchmark: Benchmark) -> float:
    """The Benchmark's failure score; a Benchmark without one is not evaluated, since a
    failing policy could then outscore a working one (say, crashing at once on a task whose
    rewards are negative)."""
    score = benchmark.spec.failure_score
    if score is None:
        raise BenchmarkError(
            f"{benchmark.spec.id} declares no failure score, so a failing policy could outscore "
            "a working one: give the worst return an Episode can have, e.g. "
            "--param failure_return=-1000 (for gymnasium:<id>), or declare failure_score "
            "in the Benchmark's spec"
        )
    return float(score)


def plan_episodes(benchmark: Benchmark, split: str, seed: int, count: int) -> list[PlannedEpisode]:
    """Plan ``count`` Episodes of ``split``; policy seeds live in their own seed domain."""
    if split not in benchmark.splits:
        raise ValueError(
            f"unknown split {split!r} for {benchmark.spec.id}; "
            f"choose from {', '.join(benchmark.splits)}"
        )
    try:
        planned = benchmark.plan(split, seed, count)
    except Exception as exc:
        raise EvaluationError(f"{benchmark.spec.id}: plan() failed: {exc!r}") from exc
    return [
        PlannedEpisode(spec, derive_seed("policy", benchmark.spec.id, split, seed, spec.index))
        for spec in planned
    ]


class EpisodeSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The public outcome of one Episode."""

    index: int
    status: str
    total_reward: float
    steps: int
    failure: str | None = None
    duration_s: float = 0.0


class EvaluationResult(msgspec.Struct, frozen=True, kw_only=True):
    benchmark_id: str
    environment_digest: str
    program_digest: str
    split: str
    feedback: Feedback
    episodes: tuple[EpisodeSummary, ...]
    # Host-side detail (EpisodeSpecs, traces): never hand this to an Agent as is.
    records: tuple[EpisodeRecord, ...] = ()
    containment: str = ""
    # The limits that held for this evaluation's policies, beside the containment level:
    # "rlimits" (always), "seccomp" (the syscall filter), "cgroup-cpu", "cgroup-memory",
    # "cgroup-pids" (a cgroup v2 leaf per policy process) and "pinned-core" (pinned to the
    # core it shares with its Episode's runner, and unable to unpin itself).
    enforced: tuple[str, ...] = ()
    jobs: int = 1
    duration_s: float = 0.0

    @property
    def failures(self) -> int:
        return sum(1 for e in self.episodes if e.status != "ok")

    def public(self) -> dict[str, Any]:
        """What may be shown to anyone: no records (they hold Host-private EpisodeSpecs
        and traces) and artifacts described by size rather than carried."""
        view: dict[str, Any] = msgspec.to_builtins(
            msgspec.structs.replace(
                self, records=(), feedback=msgspec.structs.replace(self.feedback, artifacts=())
            )
        )
        del view["records"]
        view["feedback"]["artifacts"] = [
            {
                "name": a.name,
                "media_type": a.media_type,
                "retention": a.retention,
                "size": len(a.data),
            }
            for a in self.feedback.artifacts
        ]
        view["failures"] = self.failures
        return view
