"""The Run's evaluations: Submissions on their pool Episodes, Validation, Assessment.

Each runs the Program on the Evaluator and records the outcome (its traces and
artifacts stored as blobs first); a fault of the Host or the Environment is
recorded as a failure of that phase, never a crash of the Host.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from evopolicygym.benchmark import Benchmark, EpisodeRecord
from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.records.events import ArtifactRef, EpisodeCompleted, EpisodeOutcome
from evopolicygym.records.pools import PoolError, RecordedPool
from evopolicygym.records.store import MAX_EVENT_BYTES, EventTooLarge
from evopolicygym.records.traces import encode_trace, plain_hook
from evopolicygym.registry import load_benchmark
from evopolicygym.run.config import MAX_TRACE_STEPS  # per recorded Episode
from evopolicygym.run.decider import (
    Assess,
    AssessCandidate,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Evaluate,
    FailAssessment,
    FailEvaluation,
    FailValidation,
    RecordCandidate,
    RecordReference,
    Select,
    StartAssessment,
    StartValidation,
    Validate,
)
from evopolicygym.run.decider.state import reference_due
from evopolicygym.run.ledger import Ledger, RunError, Stopping, one_line
from evopolicygym.run.pool import planned, planned_split
from evopolicygym.run.publisher import Publisher

__all__ = ["CONTENT_BYTES", "MAX_TRACE_STEPS", "Phases", "recorded_benchmark", "recorded_pool"]

log = logging.getLogger(__name__)

# Feedback content a Submission's event holds inline, at most (encoded). Larger content (a
# Benchmark's per-Episode list over many Episodes) is kept whole as a permanent artifact,
# CONTENT_ARTIFACT, and the event keeps its small fields; an event stays far below the
# store's MAX_EVENT_BYTES.
CONTENT_BYTES = min(1024 * 1024, MAX_EVENT_BYTES // 4)
CONTENT_ARTIFACT = "content.json"
_CONTENT_FIELD_BYTES = 4096  # a field of oversized content kept inline, at most


def recorded_benchmark(ledger: Ledger) -> Benchmark:
    """The Run's Benchmark, refused if it is not the one the Run was created on."""
    created, config = ledger.created, ledger.state.cfg
    try:
        benchmark = load_benchmark(created.benchmark_id, config.benchmark_params or None)
    except Exception as exc:
        raise RunError(
            f"cannot load benchmark {created.benchmark_id!r} for run {ledger.run_id}: {exc}"
        ) from exc
    if benchmark.spec.environment_digest != created.environment_digest:
        raise RunError(
            f"benchmark {created.benchmark_id} has changed since run {ledger.run_id} was created "
            f"(environment digest {benchmark.spec.environment_digest}, "
            f"recorded {created.environment_digest})"
        )
    return benchmark


def recorded_pool(ledger: Ledger) -> RecordedPool:
    """The Run's Episode pool as recorded (its blob's manifest read and checked now, each
    chunk when first used), never planned again; refused if it cannot be read back."""
    try:
        return RecordedPool.of(ledger.created, ledger.store.blobs)
    except PoolError as exc:
        raise RunError(f"run {ledger.run_id} cannot go on: {exc}") from exc


class Phases:
    """Carries out the Run's Evaluate, Validate and Assess steps."""

    def __init__(
        self,
        ledger: Ledger,
        benchmark: Benchmark,
        evaluator: Evaluator,
        publisher: Publisher,
        pool: RecordedPool | None = None,
    ) -> None:
        self._ledger = ledger
        self._benchmark = benchmark
        self._evaluator = evaluator
        self._publisher = publisher
        self._pool = pool

    @property
    def pool(self) -> RecordedPool:
        if self._pool is None:
            self._pool = recorded_pool(self._ledger)
        return self._pool

    def _eval_config(self, split: str, count: int) -> EvaluationConfig:
        config = self._ledger.state.cfg
        recorded = config.record_trajectories == "all" or (
            config.record_trajectories == "train" and split == config.train_split
        )
        # Whole Episodes for offline RL (bounded: a trace is held in memory until stored).
        trace = min(self._benchmark.spec.max_episode_steps, MAX_TRACE_STEPS) if recorded else 0
        return EvaluationConfig(
            split=split,
            episodes=count,
            jobs=config.jobs,
            episode_timeout=config.episode_timeout,
            trace_steps=trace,
        )

    def _storage_fault(self, exc: Exception) -> None:
        """A disk full or gone read-only under the Host is no evaluation's failure: the Run
        is interrupted instead (HostFault), its reserved Episodes evaluated again on resume."""
        if self._ledger.stopping:  # the Host's own stop, e.g. Ctrl-C killing the workers too
            raise Stopping() from exc
        fault = self._ledger.host_fault(exc)
        if fault is not None:
            raise fault from exc

    # ------------------------------------------------------------------ Submissions

    def evaluate_submission(self, step: Evaluate) -> dict[str, bytes]:
        """Evaluate the pending Submission, record the outcome, publish; the feedback files."""
        state = self._ledger.state
        indices = list(step.indices)
        try:
            program = self._ledger.store.blobs.get_program(step.program_digest)
            result = self._evaluator.evaluate(
                program,
                self._benchmark,
                self._eval_config(state.cfg.train_split, len(indices)),
                episodes=planned(self.pool, indices),
            )
            outcome = self._completed(step.submission_id, indices, result)
        except (
            Exception
        ) as exc:  # any fault but the policy's own is the Host's: recorded, never a crash
            self._storage_fault(exc)
            log.warning("evaluation of Submission %s failed", step.submission_id, exc_info=True)
            self._ledger.must(FailEvaluation(submission_id=step.submission_id, error=one_line(exc)))
            return self._publisher.publish()
        try:
            self._ledger.must(outcome)
        except EventTooLarge as exc:  # refused whole: nothing of it was recorded
            log.warning("the outcome of Submission %s is too large to record", step.submission_id)
            self._ledger.must(FailEvaluation(submission_id=step.submission_id, error=one_line(exc)))
        return self._publisher.publish()

    def _completed(
        self, submission_id: int, indices: list[int], result: EvaluationResult
    ) -> CompleteEvaluation:
        """The command recording ``result``, its traces and artifacts stored first as blobs."""
        blobs = self._ledger.store.blobs
        # Every trace and artifact in one put (a store directory commits them together).
        traces = [_trace_bytes(record) for record in result.records]
        stored = iter(
            blobs.put_many(
                [t for t in traces if t is not None] + [a.data for a in result.feedback.artifacts]
            )
        )
        trace_blobs = [None if t is None else next(stored) for t in traces]
        episodes = [
            EpisodeCompleted(
                submission_id=submission_id,
                index=index,
                status=summary.status,
                total_reward=summary.total_reward,
                steps=summary.steps,
                failure=summary.failure,
                duration_s=summary.duration_s,
                output_tail=record.stderr_tail,
                trace_blob=trace_blob,
            )
            for index, summary, record, trace_blob in zip(
                indices, result.episodes, result.records, trace_blobs, strict=True
            )
        ]
        artifacts = [
            ArtifactRef(
                name=a.name,
                media_type=a.media_type,
                retention=a.retention,
                blob=next(stored),
                size=len(a.data),
            )
            for a in result.feedback.artifacts
        ]
        content, whole = _bounded(_jsonable(result.feedback.content))
        if whole is not None:  # kept whole beside the event, where the Agent finds it too
            taken = {a.name for a in artifacts}
            name = next(
                n
                for i in range(len(taken) + 1)
                if (n := _numbered(CONTENT_ARTIFACT, i)) not in taken
            )
            content["content_truncated"]["artifact"] = name
            artifacts.append(
                ArtifactRef(
                    name=name,
                    media_type="application/json",
                    retention="permanent",
                    blob=blobs.put(whole),
                    size=len(whole),
                )
            )
        return CompleteEvaluation(
            submission_id=submission_id,
            episodes=episodes,
            score=float(result.feedback.score),
            failures=result.failures,
            content=content,
            artifacts=artifacts,
        )

    # ------------------------------------------------------------------ held out

    def _held_out(self, program_digest: str, split: str, seed: int, count: int) -> EvaluationResult:
        program = self._ledger.store.blobs.get_program(program_digest)
        return self._evaluator.evaluate(
            program,
            self._benchmark,
            self._eval_config(split, count),
            episodes=planned_split(self._benchmark, split, seed, count),
        )

    def validate(self, step: Validate) -> None:
        ledger = self._ledger
        validation = ledger.state.cfg.validation
        if not validation.enabled:
            ledger.must(Select())
            return
        if ledger.state.validation_candidates is None:
            ledger.must(StartValidation())
        if reference_due(ledger.state):
            # The initial Program on the same Episodes first: the reference that tells
            # whether the final Program improved on it.
            try:
                result = self._held_out(
                    ledger.state.initial_program_digest,
                    validation.split,
                    ledger.state.seeds["validation"],
                    validation.episodes_per_candidate,
                )
            except Exception as exc:
                self._storage_fault(exc)
                log.warning("validation of the initial program failed", exc_info=True)
                ledger.must(FailValidation(error=one_line(exc)))
                return
            if not self._record(
                RecordReference(
                    score=float(result.feedback.score),
                    failures=result.failures,
                    episodes=_outcomes(result),
                ),
                FailValidation,
            ):
                return
        done = {r.submission_id for r in ledger.state.validated}
        for candidate in ledger.state.validation_candidates or ():
            if candidate in done:
                continue
            submission = ledger.state.submission(candidate)
            assert submission is not None
            try:
                result = self._held_out(
                    submission.program_digest,
                    validation.split,
                    ledger.state.seeds["validation"],
                    validation.episodes_per_candidate,
                )
            except Exception as exc:
                self._storage_fault(exc)
                log.warning("validation of Submission %s failed", candidate, exc_info=True)
                ledger.must(FailValidation(error=one_line(exc)))
                return
            if not self._record(
                RecordCandidate(
                    submission_id=candidate,
                    score=float(result.feedback.score),
                    failures=result.failures,
                    episodes=_outcomes(result),
                ),
                FailValidation,
            ):
                return

    def _on_assessment_episodes(self, program_digest: str) -> EvaluationResult:
        """A Program on the Run's Assessment Episodes (its split, seed and count): the selected
        one's and every assessed candidate's are the same Episodes."""
        state = self._ledger.state
        assessment = state.cfg.assessment
        return self._held_out(
            program_digest, assessment.split, state.seeds["assessment"], assessment.episodes
        )

    def assess(self, step: Assess) -> None:
        if step.candidates:
            self._assess_candidates(step.candidates)
            return
        ledger = self._ledger
        if not ledger.state.assessment_started:
            ledger.must(StartAssessment())
        submission = ledger.state.submission(step.submission_id)
        assert submission is not None
        try:
            result = self._on_assessment_episodes(submission.program_digest)
        except Exception as exc:
            self._storage_fault(exc)
            log.warning("assessment failed", exc_info=True)
            ledger.must(FailAssessment(error=one_line(exc)))
            return
        self._record(
            CompleteAssessment(
                score=float(result.feedback.score),
                failures=result.failures,
                episodes=_outcomes(result),
                content=_bounded(_jsonable(result.feedback.content))[0],  # held out: not kept whole
            ),
            FailAssessment,
        )

    def _assess_candidates(self, candidates: tuple[int, ...]) -> None:
        """Each other validated candidate on exactly the selected one's Assessment Episodes
        (same split, seed and count), one event each, in order: a resumed Run goes on from
        the first not recorded. A candidate's failure is recorded as its own and never fails
        the Run; only a storage fault (the Host's) interrupts it."""
        ledger = self._ledger
        for candidate in candidates:
            submission = ledger.state.submission(candidate)
            assert submission is not None
            try:
                result = self._on_assessment_episodes(submission.program_digest)
            except Exception as exc:
                self._storage_fault(exc)
                log.warning("assessment of candidate %s failed", candidate, exc_info=True)
                ledger.must(AssessCandidate(submission_id=candidate, error=one_line(exc)))
                continue
            try:
                ledger.must(
                    AssessCandidate(
                        submission_id=candidate,
                        score=float(result.feedback.score),
                        failures=result.failures,
                        episodes=_outcomes(result),
                        content=_bounded(_jsonable(result.feedback.content))[0],
                    )
                )
            except EventTooLarge as exc:  # refused whole: recorded as that candidate's failure
                log.warning("the assessment of candidate %s is too large to record", candidate)
                ledger.must(AssessCandidate(submission_id=candidate, error=one_line(exc)))

    def _record(
        self, outcome: Command, failed: type[FailValidation] | type[FailAssessment]
    ) -> bool:
        """Record a held-out outcome; one too large for the log (an Episode list as long as
        the phase) is recorded as the phase's failure instead, saying so. Whether it was."""
        try:
            self._ledger.must(outcome)
        except EventTooLarge as exc:  # refused whole: nothing of it was recorded
            log.warning("the outcome of %s is too large to record", type(outcome).__name__)
            self._ledger.must(failed(error=one_line(exc)))
            return False
        return True


def _outcomes(result: EvaluationResult) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(
            index=e.index,
            status=e.status,
            total_reward=e.total_reward,
            steps=e.steps,
            failure=e.failure,
        )
        for e in result.episodes
    ]


def _bounded(content: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """``content`` as an event holds it, and its whole encoding where that is over
    ``CONTENT_BYTES``: then the event keeps only its small fields, and ``content_truncated``
    says which were left out and how large it was (and, set by the caller, the artifact
    that keeps it whole)."""
    whole = msgspec.json.encode(content, order="sorted")
    if len(whole) <= CONTENT_BYTES:
        return content, None
    kept: dict[str, Any] = {}
    left_out: list[str] = []
    for key, value in content.items():
        if len(msgspec.json.encode(value)) <= _CONTENT_FIELD_BYTES and len(kept) < 256:
            kept[key] = value
        else:
            left_out.append(key)
    kept["content_truncated"] = {"bytes": len(whole), "left_out": left_out, "artifact": None}
    return kept, whole


def _numbered(name: str, i: int) -> str:
    """``name``, or with ``-i`` before its suffix: ``content.json``, ``content-1.json``."""
    stem, dot, suffix = name.partition(".")
    return name if i == 0 else f"{stem}-{i}{dot}{suffix}"


def _jsonable(content: dict[str, Any]) -> dict[str, Any]:
    """Feedback content as plain JSON values (a Benchmark may hand back numpy scalars)."""
    data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(content, enc_hook=plain_hook))
    return data


def _trace_bytes(record: EpisodeRecord) -> bytes | None:
    """The Episode's trace blob, or None (no trace kept, or one that cannot be encoded)."""
    if not record.trace:
        return None
    try:
        return encode_trace(record.initial_observation, record.trace)
    except (TypeError, ValueError, msgspec.EncodeError):
        return None
