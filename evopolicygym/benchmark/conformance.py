"""Conformance checks any Benchmark must pass (``evopolicy benchmarks check ID`` prints them):
deterministic planning and resets, actions that survive the wire, finite rewards, Feedback
that encodes and reveals no EpisodeSpec, Environments that close. A Benchmark whose catalog
entry declares it not deterministic passes the replay check when a replay differs, saying so."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import msgspec

from evopolicygym.benchmark.catalog import catalog_entry
from evopolicygym.benchmark.contract import (
    Benchmark,
    BenchmarkError,
    BenchmarkSpec,
    Environment,
    EpisodeRecord,
    EpisodeSpec,
    EpisodeStatus,
    Feedback,
    InvalidAction,
    canonical_digest,
)
from evopolicygym.values import (
    PolicyValueError,
    decode_value,
    encode_value,
    to_policy_value,
    values_equal,
)

__all__ = ["CheckResult", "ConformanceReport", "check_benchmark"]


class CheckResult(msgspec.Struct, frozen=True):
    name: str
    ok: bool
    detail: str = ""


class ConformanceReport(msgspec.Struct, frozen=True):
    benchmark_id: str
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


class _ClosingProbe:
    """Wraps an Environment to count close() calls."""

    def __init__(self, inner: Environment) -> None:
        self.inner = inner
        self.closed = 0

    def close(self) -> None:
        self.closed += 1
        self.inner.close()


def _rollout(
    benchmark: Benchmark, episode: EpisodeSpec, steps: int, action_seed: int
) -> tuple[list[Any], _ClosingProbe]:
    rng = random.Random(action_seed)
    env = benchmark.make_environment(episode)
    probe = _ClosingProbe(env)
    frames: list[Any] = []
    try:
        obs = env.reset()
        frames.append(to_policy_value(obs))
        for _ in range(steps):
            # Through the wire codec, as a policy's action would arrive.
            action = benchmark.validate_action(
                decode_value(encode_value(benchmark.sample_action(rng)))
            )
            result = env.step(action)
            if not math.isfinite(result.reward):
                raise BenchmarkError(f"non-finite reward {result.reward!r}")
            frames.append(
                (
                    to_policy_value(result.observation),
                    float(result.reward),
                    result.terminated,
                    result.truncated,
                )
            )
            if result.terminated or result.truncated:
                break
    finally:
        probe.close()
    return frames, probe


class _Subject:
    """The Benchmark under check, and what one check leaves for a later one."""

    def __init__(self, benchmark: Benchmark, episodes: int, steps: int) -> None:
        self.benchmark = benchmark
        self.episodes = episodes
        self.steps = steps
        self.returns: list[float] = []  # of the random rollouts, for the failure check


def _interface(subject: _Subject) -> None:
    benchmark = subject.benchmark
    missing = [
        m
        for m in ("plan", "make_environment", "validate_action", "sample_action", "score")
        if not callable(getattr(benchmark, m, None))
    ]
    if missing or not isinstance(getattr(benchmark, "spec", None), BenchmarkSpec):
        raise BenchmarkError(f"missing {missing or ['spec']}")
    if not benchmark.splits or len(set(benchmark.splits)) != len(benchmark.splits):
        raise BenchmarkError("splits must be non-empty and distinct")


def _spec(subject: _Subject) -> None:
    s = subject.benchmark.spec
    if not s.id or s.score_direction not in ("maximize", "minimize") or s.max_episode_steps <= 0:
        raise BenchmarkError("spec needs an id, a score direction and a positive max_episode_steps")
    for field in ("observation_space", "action_space", "metadata", "environment_parameters"):
        encode_value(getattr(s, field))
    canonical_digest(s.environment_parameters)


def _planning(subject: _Subject) -> str:
    benchmark, episodes = subject.benchmark, subject.episodes
    split = benchmark.splits[0]
    a = benchmark.plan(split, 7, episodes)
    b = benchmark.plan(split, 7, episodes)
    if a != b or len(a) != episodes:
        raise BenchmarkError("plan() is not deterministic or returned the wrong count")
    if [e.index for e in a] != list(range(episodes)):
        raise BenchmarkError("planned Episodes must be indexed 0..count-1")
    seen: dict[int, str] = {}
    for split in benchmark.splits:
        for e in benchmark.plan(split, 7, episodes):
            if seen.setdefault(e.seed, split) != split:
                raise BenchmarkError(f"splits {seen[e.seed]!r} and {split!r} share an Episode seed")
    return f"{episodes} Episodes per split"


def _replay(subject: _Subject) -> str:
    benchmark, steps = subject.benchmark, subject.steps
    planned = benchmark.plan(benchmark.splits[0], 11, subject.episodes)
    entry = catalog_entry(benchmark)
    declared_nondeterministic = entry is not None and not entry.deterministic
    total = 0
    differed = 0
    for episode in planned:
        first, probe_a = _rollout(benchmark, episode, steps, episode.index)
        subject.returns.append(sum(frame[1] for frame in first[1:]))
        second, probe_b = _rollout(benchmark, episode, steps, episode.index)
        if probe_a.closed != 1 or probe_b.closed != 1:
            raise BenchmarkError("close() not called exactly once")
        if not values_equal(first, second):
            if not declared_nondeterministic:
                raise BenchmarkError(
                    f"Episode {episode.index} differs when replayed with the same actions"
                )
            differed += 1
        total += len(first) - 1
    if declared_nondeterministic:
        return (
            f"declared not deterministic: {differed} of {len(planned)} Episodes differed "
            "when replayed"
        )
    return f"{total} steps replayed identically"


def _invalid_actions(subject: _Subject) -> None:
    for bad in (object(), "not-an-action", float("nan")):
        try:
            subject.benchmark.validate_action(bad)
        except InvalidAction:
            continue
        raise BenchmarkError(f"validate_action accepted {bad!r}")


def _scoring(subject: _Subject) -> str:
    benchmark = subject.benchmark
    planned = benchmark.plan(benchmark.splits[0], 3, subject.episodes)
    private_policy_seed = 7_919_000_000_000_001  # distinctive, so a leak is recognisable
    records = [
        EpisodeRecord(
            spec=e, policy_seed=private_policy_seed, status="ok", total_reward=float(i), steps=1
        )
        for i, e in enumerate(planned)
    ]
    records.append(
        EpisodeRecord(
            spec=planned[0],
            policy_seed=private_policy_seed,
            status="timeout",
            total_reward=0.0,
            steps=0,
            failure="deadline",
        )
    )
    feedback = benchmark.score(records)
    if not isinstance(feedback, Feedback):
        raise BenchmarkError("score() must return Feedback")
    try:
        encode_value(feedback.content)
    except PolicyValueError as exc:
        raise BenchmarkError(f"feedback content is not a PolicyValue: {exc}") from exc
    public = msgspec.json.encode(feedback.content) + b"".join(a.data for a in feedback.artifacts)
    for secret in [*(e.seed for e in planned), private_policy_seed]:
        if str(secret).encode() in public:
            raise BenchmarkError("feedback reveals a Host-private seed")
    # Scored on made-up records (returns 0, 1, ... and a failed Episode), so the figure is
    # the same for Benchmarks alike in failure score: labelled, never read as a measurement.
    return f"on synthetic records, not a measurement: {feedback.score:g}"


def _failures_never_win(subject: _Subject) -> str:
    """A failed Episode scores the declared failure score, which no completed Episode
    beats from below: here, none of the random rollouts' returns."""
    benchmark = subject.benchmark
    declared = benchmark.spec.failure_score
    if declared is None:
        raise BenchmarkError("spec declares no failure_score (what a failed Episode scores)")
    episode = benchmark.plan(benchmark.splits[0], 5, 1)[0]

    def scored(status: EpisodeStatus, total: float) -> float:
        record = EpisodeRecord(
            spec=episode, policy_seed=1, status=status, total_reward=total, steps=1
        )
        return float(benchmark.score([record]).score)

    failed = scored("exception", 0.0)
    sign = 1.0 if benchmark.spec.score_direction == "maximize" else -1.0
    for total in subject.returns or [0.0]:
        if sign * failed > sign * scored("ok", total):
            raise BenchmarkError(
                f"a failed Episode ({failed:g}) beats a completed one returning {total:g}"
            )
    return f"failure score {declared:g}"


# Run in this order after the interface check (which the others need): each returns a
# detail to show, or raises when the Benchmark fails it.
_CHECKS: tuple[tuple[str, Callable[[_Subject], object]], ...] = (
    ("spec", _spec),
    ("planning", _planning),
    ("replay determinism and close", _replay),  # before the failure check: it reads returns
    ("invalid actions rejected", _invalid_actions),
    ("scoring", _scoring),
    ("failures never win", _failures_never_win),
)


def _run(name: str, check: Callable[[_Subject], object], subject: _Subject) -> CheckResult:
    try:
        value = check(subject)
    except Exception as exc:
        return CheckResult(name, False, f"{type(exc).__name__}: {exc}")
    return CheckResult(name, True, "" if value is None or value is True else str(value))


def check_benchmark(
    benchmark: Benchmark, *, episodes: int = 2, steps: int = 200
) -> ConformanceReport:
    """Run the conformance checks: interface, spec, planning and replay determinism, close,
    scoring."""
    subject = _Subject(benchmark, episodes, steps)
    interface = _run("interface", _interface, subject)
    if not interface.ok:
        spec_id = getattr(getattr(benchmark, "spec", None), "id", "?")
        return ConformanceReport(spec_id, (interface,))
    checks = [interface, *(_run(name, check, subject) for name, check in _CHECKS)]
    return ConformanceReport(benchmark.spec.id, tuple(checks))
