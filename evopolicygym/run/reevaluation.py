"""Re-run every recorded score of a Run and compare: ``evopolicy record replay --reevaluate``.

``reevaluate`` re-runs every published Submission on its recorded pool Episodes and
the recorded Validation and Assessment Episodes (every assessed candidate's too), and
compares scores (exact float equality), failure counts and each Episode's status and
total reward. Mismatches carry no Host-private value: recorded free text is scrubbed of
the Run's seeds.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, Literal

import msgspec

from evopolicygym.benchmark import Benchmark
from evopolicygym.evaluation import EvaluationConfig, EvaluationError, Evaluator, PlannedEpisode
from evopolicygym.program import ProgramError
from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.events import (
    AssessmentCompleted,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationStarted,
    Event,
    ReferenceValidated,
    RunCreated,
    SubmissionPublished,
    ValidationStarted,
)
from evopolicygym.records.location import Store
from evopolicygym.records.pools import PoolError, RecordedPool
from evopolicygym.records.private import PrivateValues
from evopolicygym.records.runs import run_id_of
from evopolicygym.registry import load_benchmark
from evopolicygym.run.config import RunConfig, RunConfigError
from evopolicygym.run.pool import planned, planned_split
from evopolicygym.run.replay import ReplayError, decoded, stream_of

__all__ = ["Mismatch", "Progress", "reevaluate"]

Progress = Callable[[int, int], None]  # (Episodes done, Episodes in all)


class Mismatch(msgspec.Struct, frozen=True, kw_only=True):
    phase: Literal[
        "run", "submission", "validation", "reference", "assessment", "candidate_assessment"
    ]
    submission_id: int | None = None
    episode: int | None = None  # the Episode's index (a pool index for a Submission)
    field: str  # score, failures, status, total_reward, episodes, error, environment_digest
    recorded: str | float | int | None = None
    replayed: str | float | int | None = None

    def describe(self) -> str:
        where = self.phase if self.submission_id is None else f"{self.phase} {self.submission_id}"
        if self.episode is not None:
            where += f" Episode {self.episode}"
        if self.field == "error":
            return f"{where}: cannot re-evaluate: {self.replayed}"
        return (
            f"{where}: {self.field} recorded {_exact(self.recorded)}, "
            f"replayed {_exact(self.replayed)}"
        )


def _exact(value: Any) -> str:
    # repr keeps every digit of a float: a mismatch may sit in the last one.
    return repr(value) if isinstance(value, float) else str(value)


class _Job(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded evaluation to re-run."""

    phase: Literal["submission", "validation", "reference", "assessment", "candidate_assessment"]
    submission_id: int
    program_digest: str
    split: str
    score: float
    failures: int
    outcomes: list[EpisodeOutcome]  # the recorded Episodes, in order
    indices: list[int] = []  # pool indices (Submissions)
    seed: int = 0  # Host-private (Validation, Assessment): only used, never shown
    count: int = 0


def _events(store: Store, stream_id: str) -> Iterator[Event]:
    for envelope in store.events.read_stream(stream_id, 0):
        if envelope.type == "AgentMessages":
            continue  # transcripts: the bulk of a Run, and nothing to re-evaluate
        event, _ = decoded(envelope)
        if event is not None:  # replay_run reports what does not decode
            yield event


def _outcome(event: EpisodeCompleted) -> EpisodeOutcome:
    return EpisodeOutcome(
        index=event.index,
        status=event.status,
        total_reward=event.total_reward,
        steps=event.steps,
        failure=event.failure,
    )


def _submission_job(
    started: EvaluationStarted, published: SubmissionPublished, outcomes: list[EpisodeOutcome]
) -> _Job:
    """A Submission, re-run on its recorded pool indices."""
    return _Job(
        phase="submission",
        submission_id=published.submission_id,
        program_digest=started.program_digest,
        split="",
        score=published.score,
        failures=published.failures,
        outcomes=outcomes,
        indices=list(started.indices),
        count=len(started.indices),
    )


def _held_out_job(
    phase: Literal["validation", "reference", "assessment", "candidate_assessment"],
    submission_id: int,
    program_digest: str,
    started: ValidationStarted | AssessmentStarted,
    score: float,
    result: ReferenceValidated | CandidateValidated | AssessmentCompleted | CandidateAssessed,
) -> _Job:
    """A Validation or Assessment result, re-run on the Episodes its start planned."""
    return _Job(
        phase=phase,
        submission_id=submission_id,
        program_digest=program_digest,
        split=started.split,
        score=score,
        failures=result.failures,
        outcomes=list(result.episodes),
        seed=started.seed,
        count=started.episodes,
    )


class _Recorded:
    """What the Run's events recorded so far, gathered into the jobs to re-run."""

    def __init__(self) -> None:
        self.created: RunCreated | None = None
        self.started: dict[int, EvaluationStarted] = {}
        self.episodes: dict[int, list[EpisodeOutcome]] = {}
        self.validation: ValidationStarted | None = None
        self.assessment: AssessmentStarted | None = None
        self.jobs: list[_Job] = []

    def digest_of(self, submission_id: int) -> str:
        return self.started[submission_id].program_digest

    def add(self, event: Event) -> None:
        match event:
            case RunCreated() if self.created is None:
                self.created = event
            case EvaluationStarted():
                self.started[event.submission_id] = event
            case EpisodeCompleted():
                self.episodes.setdefault(event.submission_id, []).append(_outcome(event))
            case SubmissionPublished() if event.submission_id in self.started:
                outcomes = self.episodes.get(event.submission_id, [])
                self.jobs.append(
                    _submission_job(self.started[event.submission_id], event, outcomes)
                )
            case ValidationStarted():
                self.validation = event
            case AssessmentStarted():
                self.assessment = event
            case _:
                self.add_held_out(event)

    def add_held_out(self, event: Event) -> None:
        validation, assessment, started = self.validation, self.assessment, self.started
        job: _Job | None = None
        match event:
            case ReferenceValidated() if validation is not None and self.created is not None:
                digest = self.created.initial_program_digest  # the initial Program: id 0
                job = _held_out_job("reference", 0, digest, validation, event.score, event)
            case CandidateValidated() if validation is not None and event.submission_id in started:
                digest = self.digest_of(event.submission_id)
                job = _held_out_job(
                    "validation", event.submission_id, digest, validation, event.score, event
                )
            case AssessmentCompleted() if assessment is not None and (
                assessment.submission_id in started
            ):
                digest = self.digest_of(assessment.submission_id)
                job = _held_out_job(
                    "assessment", assessment.submission_id, digest, assessment, event.score, event
                )
            case CandidateAssessed() if (
                assessment is not None
                and event.score is not None
                and event.submission_id in started
            ):  # a failed one (no score) recorded a fault of that evaluation, nothing to compare
                digest = self.digest_of(event.submission_id)
                job = _held_out_job(
                    "candidate_assessment",
                    event.submission_id,
                    digest,
                    assessment,
                    event.score,
                    event,
                )
        if job is not None:
            self.jobs.append(job)


def _jobs(store: Store, stream_id: str) -> tuple[RunCreated, list[_Job]]:
    recorded = _Recorded()
    for event in _events(store, stream_id):
        recorded.add(event)
    if recorded.created is None:
        raise ReplayError(f"run {run_id_of(stream_id)!r} has no readable RunCreated")
    return recorded.created, recorded.jobs


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def reevaluate(
    store: Store,
    run_id: str,
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    evaluator: Evaluator | None = None,
) -> list[Mismatch]:
    """Re-run every recorded score of the Run and return where the results differ
    (empty when everything reproduces). ``progress(done, total)`` counts Episodes;
    ``evaluator`` plays them (its maker closes it; default: a local one)."""
    stream_id = stream_of(run_id)
    created, work = _jobs(store, stream_id)
    private = PrivateValues.of(created, store.blobs)
    try:
        config = RunConfig.from_dict(created.config)
    except RunConfigError as exc:
        raise ReplayError(f"the Run's config cannot be read: {exc}") from exc
    try:
        benchmark = load_benchmark(created.benchmark_id, config.benchmark_params or None)
    except Exception as exc:  # a factory may fail in any way
        raise ReplayError(
            f"cannot load benchmark {created.benchmark_id!r}: {private.scrub(str(exc))}"
        ) from exc
    mismatches: list[Mismatch] = []
    digest = benchmark.spec.environment_digest
    if digest != created.environment_digest:  # the Benchmark changed: scores may differ for it
        mismatches.append(
            Mismatch(
                phase="run",
                field="environment_digest",
                recorded=created.environment_digest,
                replayed=digest,
            )
        )
    total = sum(job.count for job in work)
    done = 0
    if progress is not None:
        progress(0, total)
    try:
        pool = RecordedPool.of(created, store.blobs)  # as recorded, never planned again
    except PoolError as exc:
        raise ReplayError(str(exc)) from exc
    with contextlib.nullcontext(evaluator) if evaluator is not None else Evaluator() as engine:
        for job in work:
            offset = done

            def step(finished: int, _count: int, offset: int = offset) -> None:
                if progress is not None:
                    progress(offset + finished, total)

            mismatches.extend(
                _rerun(store, engine, benchmark, config, pool, job, step, private, jobs)
            )
            done += job.count
            if progress is not None:
                progress(done, total)
    return mismatches


def _rerun(
    store: Store,
    evaluator: Evaluator,
    benchmark: Benchmark,
    config: RunConfig,
    pool: RecordedPool,
    job: _Job,
    step: Progress,
    private: PrivateValues,
    jobs: int | None,
) -> list[Mismatch]:
    def mismatch(field: str, recorded: Any, replayed: Any, episode: int | None = None) -> Mismatch:
        return Mismatch(
            phase=job.phase,
            submission_id=None if job.phase == "reference" else job.submission_id,
            episode=episode,
            field=field,
            recorded=recorded,
            replayed=replayed,
        )

    split = config.train_split if job.phase == "submission" else job.split
    try:
        episodes: list[PlannedEpisode]
        if job.phase == "submission":
            if any(not 0 <= i < len(pool) for i in job.indices):
                return [mismatch("error", None, "an Episode index is outside the recorded pool")]
            episodes = planned(pool, job.indices)
        else:
            episodes = planned_split(benchmark, split, job.seed, job.count)
        program = store.blobs.get_program(job.program_digest)
        result = evaluator.evaluate(
            program,
            benchmark,
            EvaluationConfig(
                split=split,
                episodes=len(episodes),
                jobs=jobs if jobs is not None else config.jobs,
                episode_timeout=config.episode_timeout,
                trace_steps=0,  # traces do not change a score
            ),
            episodes=episodes,
            progress=step,
        )
    except (EvaluationError, ProgramError, BlobError, PoolError, ValueError, OSError) as exc:
        return [mismatch("error", None, private.scrub(f"{type(exc).__name__}: {exc}"))]
    found: list[Mismatch] = []
    score = float(result.feedback.score)
    if not _same(score, job.score):
        found.append(mismatch("score", job.score, score))
    if result.failures != job.failures:
        found.append(mismatch("failures", job.failures, result.failures))
    if len(result.episodes) != len(job.outcomes):
        found.append(mismatch("episodes", len(job.outcomes), len(result.episodes)))
    # Submissions' Episodes are known by pool index; held-out ones by their planned index.
    keys = job.indices if job.phase == "submission" else [e.index for e in result.episodes]
    recorded = {outcome.index: outcome for outcome in job.outcomes}
    for key, summary in zip(keys, result.episodes, strict=False):
        before = recorded.get(key)
        if before is None:
            found.append(mismatch("status", None, summary.status, key))
            continue
        if before.status != summary.status:
            found.append(mismatch("status", before.status, summary.status, key))
        if not _same(before.total_reward, summary.total_reward):
            found.append(mismatch("total_reward", before.total_reward, summary.total_reward, key))
    return found
