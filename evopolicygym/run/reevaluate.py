"""Re-run every recorded score of a Run and compare: ``evopolicy record replay --reevaluate``.

``reevaluate`` re-runs every published Submission on its recorded pool Episodes and
the recorded Validation and Assessment Episodes (every assessed candidate's too), and compares scores (exact float
equality), failure counts and each Episode's status and total reward. Mismatches carry
no Host-private value: recorded free text is scrubbed of the Run's seeds.
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
from evopolicygym.records.blobs import BlobError
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
        return f"{where}: {self.field} recorded {_exact(self.recorded)}, replayed {_exact(self.replayed)}"


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


def _jobs(store: Store, stream_id: str) -> tuple[RunCreated, list[_Job]]:
    created: RunCreated | None = None
    started: dict[int, EvaluationStarted] = {}
    episodes: dict[int, list[EpisodeOutcome]] = {}
    validation: ValidationStarted | None = None
    assessment: AssessmentStarted | None = None
    jobs: list[_Job] = []
    for event in _events(store, stream_id):
        match event:
            case RunCreated() if created is None:
                created = event
            case EvaluationStarted():
                started[event.submission_id] = event
            case EpisodeCompleted():
                episodes.setdefault(event.submission_id, []).append(
                    EpisodeOutcome(
                        index=event.index,
                        status=event.status,
                        total_reward=event.total_reward,
                        steps=event.steps,
                        failure=event.failure,
                    )
                )
            case SubmissionPublished() if event.submission_id in started:
                begun = started[event.submission_id]
                jobs.append(
                    _Job(
                        phase="submission",
                        submission_id=event.submission_id,
                        program_digest=begun.program_digest,
                        split="",
                        score=event.score,
                        failures=event.failures,
                        outcomes=episodes.get(event.submission_id, []),
                        indices=list(begun.indices),
                        count=len(begun.indices),
                    )
                )
            case ValidationStarted():
                validation = event
            case ReferenceValidated() if validation is not None and created is not None:
                jobs.append(
                    _Job(
                        phase="reference",
                        submission_id=0,  # the initial Program
                        program_digest=created.initial_program_digest,
                        split=validation.split,
                        score=event.score,
                        failures=event.failures,
                        outcomes=list(event.episodes),
                        seed=validation.seed,
                        count=validation.episodes,
                    )
                )
            case CandidateValidated() if validation is not None and event.submission_id in started:
                jobs.append(
                    _Job(
                        phase="validation",
                        submission_id=event.submission_id,
                        program_digest=started[event.submission_id].program_digest,
                        split=validation.split,
                        score=event.score,
                        failures=event.failures,
                        outcomes=list(event.episodes),
                        seed=validation.seed,
                        count=validation.episodes,
                    )
                )
            case AssessmentStarted():
                assessment = event
            case AssessmentCompleted() if assessment is not None and (
                assessment.submission_id in started
            ):
                jobs.append(
                    _Job(
                        phase="assessment",
                        submission_id=assessment.submission_id,
                        program_digest=started[assessment.submission_id].program_digest,
                        split=assessment.split,
                        score=event.score,
                        failures=event.failures,
                        outcomes=list(event.episodes),
                        seed=assessment.seed,
                        count=assessment.episodes,
                    )
                )
            case CandidateAssessed() if (
                assessment is not None
                and event.score is not None
                and event.submission_id in started
            ):  # a failed one (no score) recorded a fault of that evaluation, nothing to compare
                jobs.append(
                    _Job(
                        phase="candidate_assessment",
                        submission_id=event.submission_id,
                        program_digest=started[event.submission_id].program_digest,
                        split=assessment.split,
                        score=event.score,
                        failures=event.failures,
                        outcomes=list(event.episodes),
                        seed=assessment.seed,
                        count=assessment.episodes,
                    )
                )
            case _:
                pass
    if created is None:
        raise ReplayError(f"run {run_id_of(stream_id)!r} has no readable RunCreated")
    return created, jobs


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
