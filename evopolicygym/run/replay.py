"""Replay a Run from its log: fold it, check its part of the chain and its blobs, and lay out
what happened as a timeline (``reevaluation`` re-runs its scores).

``replay_run`` reads one Run's stream and never writes. Its checks are the stream's
share of ``record verify`` (versions, payload hashes, each event's chain hash and its
link to the event before it, decoding, every blob and Program the events name) plus
the Run's own rules: every event is folded with the decider's ``evolve``, so an event
the rules forbid is a problem naming its stream version.

The totals (budget, Submissions, the best published one, the final program) are the
Run read API's ``RunSummary``, folded alongside.

Nothing here returns Host-private values (pool seeds and scenarios, derived seeds,
Validation and Assessment seeds, the Run seed): replay output is shown to people,
and recorded free text (errors, reasons) is scrubbed of any of those numbers.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from evopolicygym.protocol import format_selector
from evopolicygym.records.chain import GENESIS, chain_hash
from evopolicygym.records.events import (
    AgentExited,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    Envelope,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    FinishRejected,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
    payload_hash,
)
from evopolicygym.records.fold import page_reader
from evopolicygym.records.location import Store
from evopolicygym.records.pools import pool_problems, recorded_pool_size
from evopolicygym.records.private import PrivateValues
from evopolicygym.records.runs import RUN_PREFIX, RunSummary, run_id_of, run_stream_id
from evopolicygym.records.timeline import (
    AgentEntry,
    AssessmentEntry,
    CandidateEntry,
    CreatedEntry,
    FinishedEntry,
    FinishEntry,
    HostEntry,
    ReferenceEntry,
    RejectionEntry,
    SelectionEntry,
    SubmissionEntry,
    TimelineEntry,
    ValidationEntry,
)
from evopolicygym.records.verify import BlobChecker, referenced_blobs
from evopolicygym.run.config import RunConfigError
from evopolicygym.run.decider import (
    InvalidTransition,
    RunState,
    evolve,
    terminal_reason,
)

__all__ = ["Replay", "ReplayError", "ReplayProblem", "decoded", "replay_run", "stream_of"]

_RAW_JSON = msgspec.json.Decoder()


class ReplayError(Exception):
    """The Run cannot be replayed at all (no such stream, no RunCreated, no Benchmark)."""


# --------------------------------------------------------------------------- results


class ReplayProblem(msgspec.Struct, frozen=True, kw_only=True):
    version: int  # stream version; 0 for the stream as a whole
    position: int  # global position; 0 when none applies
    event_type: str
    kind: str  # transition, consistency, chain, version, payload_hash, decode, blob_missing, ...
    message: str
    blob: str | None = None  # the blob or Program digest, for blob problems

    def describe(self) -> str:
        where = f"v{self.version} {self.event_type}" if self.version else "stream"
        return f"{where}: {self.message}"


RunStatus = Literal["empty", "in progress", "interrupted", "finished"]


class Replay(msgspec.Struct, kw_only=True):
    run_id: str
    stream_id: str
    events: int = 0
    status: RunStatus = "empty"
    terminal_reason: str | None = None
    benchmark_id: str | None = None
    score_direction: str = "maximize"
    episode_budget: int | None = None
    budget_used: int = 0
    budget_left: int | None = None
    submissions: int = 0
    published: int = 0
    failed: int = 0
    rejections: int = 0
    agent_attempts: int = 0
    best_submission_id: int | None = None  # by train score
    final_submission_id: int | None = None
    assessment_score: float | None = None
    timeline: list[TimelineEntry] = []
    problems: list[ReplayProblem] = []

    @property
    def ok(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------- reading


def stream_of(run: str) -> str:
    """The stream of a Run given as ``<id>`` or ``run-<id>``."""
    return run if run.startswith(RUN_PREFIX) else run_stream_id(run)


def decoded(envelope: Envelope) -> tuple[Event | None, str | None]:
    """The event, or why it does not decode (an upcaster may fail in any way)."""
    payload = envelope.payload
    if not isinstance(payload, bytes):
        payload = payload.encode() if isinstance(payload, str) else bytes(payload)
        envelope = msgspec.structs.replace(envelope, payload=payload)
    try:
        return envelope.event(), None
    except Exception as exc:
        return None, f"payload does not decode: {exc}"


class _Checker:
    """The stream's share of ``verify_store``: envelope hashes, links, versions and blobs."""

    def __init__(self, store: Store, private: PrivateValues) -> None:
        self.read_rows = page_reader(store)
        self.private = private
        self.blob_checker = BlobChecker(store.blobs)
        self.previous: Envelope | None = None

    def envelope(self, envelope: Envelope) -> list[tuple[str, str, str | None]]:
        found: list[tuple[str, str, str | None]] = []
        expected = self.previous.stream_version + 1 if self.previous is not None else 1
        if envelope.stream_version != expected:
            found.append(
                ("version", f"stream version {envelope.stream_version}, expected {expected}", None)
            )
        payload = envelope.payload
        if not isinstance(payload, bytes):  # a tampered row can hold TEXT
            found.append(("payload_type", f"payload is {type(payload).__name__}, not bytes", None))
            payload = payload.encode() if isinstance(payload, str) else bytes(payload)
        if payload_hash(payload) != envelope.payload_hash:
            found.append(("payload_hash", "the payload does not hash to its stored hash", None))
        computed = chain_hash(
            envelope.prev_hash,
            envelope.position,
            envelope.stream_id,
            envelope.stream_version,
            envelope.event_id,
            envelope.type,
            envelope.schema_version,
            envelope.recorded_at,
            envelope.payload_hash,
        )
        if computed != envelope.hash:
            found.append(("chain", "the chain hash does not match the envelope", None))
        link = self._link(envelope)
        if link is not None:
            found.append(("chain", link, None))
        self.previous = envelope
        return found

    def _link(self, envelope: Envelope) -> str | None:
        """Why ``prev_hash`` does not link to the event before it in the global log, if so."""
        position = envelope.position
        if position == 1:
            return None if envelope.prev_hash == GENESIS else "prev_hash is not the genesis hash"
        previous = self.previous
        if previous is not None and previous.position == position - 1:
            before = previous.hash
        else:  # another stream's event sits in between: read just that one
            rows = self.read_rows(position - 2, 1)
            if not rows or rows[0][0] != position - 1:
                return f"no event at global position {position - 1} to link to"
            before = rows[0][10]  # Envelope field order: ``hash`` is the last
        if envelope.prev_hash != before:
            return f"prev_hash does not link to global position {position - 1}"
        return None

    def references(self, event: Event | None, payload: Any) -> list[tuple[str, str, str | None]]:
        if event is not None:
            walked = msgspec.to_builtins(event)
        else:  # still check what the raw payload names
            try:
                walked = _RAW_JSON.decode(payload)
            except (msgspec.DecodeError, TypeError):
                return []
        found: list[tuple[str, str, str | None]] = []
        for kind, digest in referenced_blobs(walked):
            outcome = self.blob_checker.check(kind, digest)
            if outcome is not None:
                found.append((outcome[0], outcome[1], digest))
        return found


# --------------------------------------------------------------------------- replay


class _Builder:
    """Folds the stream event by event into the Replay."""

    def __init__(self, store: Store, stream_id: str) -> None:
        self.blobs = store.blobs
        self.private = PrivateValues()
        self.checker = _Checker(store, self.private)
        self.replay = Replay(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id)
        self.summary = RunSummary(run_id=self.replay.run_id, stream_id=stream_id)
        self.state = RunState()
        self.fold_trusted = True  # False once an event was refused: later checks would cascade
        self.submissions: dict[int, SubmissionEntry] = {}
        self.indices: dict[int, list[int]] = {}
        self.episodes: dict[int, list[int]] = {}
        self.last_type: str | None = None

    def problem(
        self,
        envelope: Envelope | None,
        kind: str,
        message: str,
        blob: str | None = None,
        event_type: str | None = None,
    ) -> None:
        self.replay.problems.append(
            ReplayProblem(
                version=envelope.stream_version if envelope is not None else 0,
                position=envelope.position if envelope is not None else 0,
                event_type=event_type or (envelope.type if envelope is not None else ""),
                kind=kind,
                message=self.private.scrub(message),
                blob=blob,
            )
        )

    def add(self, envelope: Envelope) -> None:
        self.replay.events += 1
        self.last_type = envelope.type
        for kind, message, blob in self.checker.envelope(envelope):
            self.problem(envelope, kind, message, blob)
        event, error = decoded(envelope)
        if isinstance(event, RunCreated):
            self.private.add_created(event, self.blobs)  # before any text of this Run is kept
        for kind, message, blob in self.checker.references(event, envelope.payload):
            self.problem(envelope, kind, message, blob)
        if (
            isinstance(event, RunCreated)
            and event.pool_blob is not None
            and self.checker.blob_checker.check("blob", event.pool_blob) is None
        ):  # the pool's manifest is intact (a problem with it is reported above): its chunks
            for bad in pool_problems(self.blobs, event):
                self.problem(
                    envelope,
                    "blob_missing" if bad.missing else "blob_corrupt",
                    str(bad),
                    event.pool_blob,
                )
        if event is None:
            self.problem(envelope, "decode", error or "payload does not decode")
            self.fold_trusted = False
            return
        self._consistency(envelope, event)
        self.summary.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
        try:
            self.state = evolve(self.state, event)
        except (InvalidTransition, RunConfigError) as exc:
            self.problem(envelope, "transition", f"the Run's rules forbid this event: {exc}")
            self.fold_trusted = False
        self._timeline(envelope.stream_version, event)

    def _consistency(self, envelope: Envelope, event: Event) -> None:
        """What ``evolve`` does not check but a Host following the decider guarantees."""
        match event:
            case RunCreated() if event.run_id != self.replay.run_id:
                self.problem(
                    envelope, "consistency", f"RunCreated names run {event.run_id!r}, not this one"
                )
            case SubmissionPublished() if event.submission_id in self.indices:
                ran = self.episodes.get(event.submission_id, [])
                wanted = self.indices[event.submission_id]
                if ran != wanted:
                    self.problem(
                        envelope,
                        "consistency",
                        f"Submission {event.submission_id} recorded Episodes "
                        f"{format_selector(ran) or 'none'}, not {format_selector(wanted)}",
                    )
            case RunFinished() if self.fold_trusted and self.state.created:
                expected = terminal_reason(self.state)
                if event.reason != expected:
                    self.problem(
                        envelope,
                        "consistency",
                        f"the Run finished as {event.reason!r}; its events say {expected!r}",
                    )
                if event.final_submission_id != self.state.selected:
                    self.problem(
                        envelope,
                        "consistency",
                        f"RunFinished names final Submission {event.final_submission_id}, "
                        f"but {self.state.selected} was selected",
                    )
            case _:
                pass

    def _timeline(self, version: int, event: Event) -> None:
        entry = self._run_entry(version, event)
        if entry is None:
            entry = self._ending_entry(version, event)
        if entry is not None:
            self.replay.timeline.append(entry)

    def _run_entry(self, version: int, event: Event) -> TimelineEntry | None:
        """The entry of a Run, Agent or Submission event; a Submission's outcome completes
        the entry its start made (None: nothing new to append)."""
        text = self.private.scrub
        match event:
            case RunCreated():
                return CreatedEntry(
                    version=version,
                    benchmark_id=event.benchmark_id,
                    agent=event.agent.name,
                    episode_budget=self.summary.episode_budget,
                    pool_size=recorded_pool_size(event) or 0,
                )
            case AgentStarted():
                return AgentEntry(version=version, event="started", attempt=event.attempt)
            case AgentExited():
                return AgentEntry(
                    version=version,
                    event="exited",
                    attempt=event.attempt,
                    exit_code=event.exit_code,
                    signal=event.signal,
                    reason=text(event.reason),
                    errors=event.errors,
                    last_error=None if event.last_error is None else text(event.last_error),
                )
            case SubmissionRejected():
                return RejectionEntry(
                    version=version,
                    request="submit",
                    code=event.code,
                    message=text(event.message),
                    selector=text(event.selector) if event.selector is not None else None,
                )
            case FinishRejected():
                return RejectionEntry(
                    version=version,
                    request="finish",
                    code=event.code,
                    message=text(event.message),
                    candidates=list(event.candidates),
                )
            case FinishAccepted():
                return FinishEntry(version=version, candidates=list(event.candidates))
            case EvaluationStarted():
                self.indices[event.submission_id] = list(event.indices)
                entry = self.submissions[event.submission_id] = SubmissionEntry(
                    version=version,
                    submission_id=event.submission_id,
                    selector=format_selector(list(event.indices)),
                    episodes=len(event.indices),
                    program_digest=event.program_digest,
                    parent_program_digest=event.parent_program_digest,
                )
                return entry
            case EpisodeCompleted():
                self.episodes.setdefault(event.submission_id, []).append(event.index)
            case SubmissionPublished() | EvaluationFailed():
                self._complete(version, event)
        return None

    def _complete(self, version: int, event: SubmissionPublished | EvaluationFailed) -> None:
        found = self.submissions.get(event.submission_id)
        if found is None:
            return
        found.completed_version = version
        if isinstance(event, EvaluationFailed):
            found.status = "failed"
            found.error = self.private.scrub(event.error)
            return
        found.status = "published"
        found.score = event.score
        found.failures = event.failures
        # The summary has folded this event: is it the best published now?
        found.best_so_far = self.summary.best_submission_id == event.submission_id
        found.best_so_far_basis = self.summary.best_basis

    def _ending_entry(self, version: int, event: Event) -> TimelineEntry | None:
        """The entry of a Validation, Assessment or Host event, or of the Run's end (None for
        AgentMessages: the transcript, not part of the timeline)."""
        text = self.private.scrub
        match event:
            case ValidationStarted():
                return ValidationEntry(
                    version=version,
                    event="started",
                    candidates=list(event.candidates),
                    split=event.split,
                    episodes=event.episodes,
                    handoff=self.summary.candidates_by,
                )
            case ReferenceValidated():
                return ReferenceEntry(
                    version=version,
                    score=event.score,
                    failures=event.failures,
                    episodes=len(event.episodes),
                )
            case CandidateValidated():
                return CandidateEntry(
                    version=version,
                    submission_id=event.submission_id,
                    score=event.score,
                    failures=event.failures,
                    episodes=len(event.episodes),
                )
            case ValidationFailed():
                return ValidationEntry(version=version, event="failed", error=text(event.error))
            case FinalSubmissionSelected():
                return SelectionEntry(
                    version=version,
                    submission_id=event.submission_id,
                    score=event.score,
                    reason=text(event.reason),
                )
            case AssessmentStarted() | AssessmentCompleted() | AssessmentFailed():
                return self._assessment_entry(version, event)
            case CandidateAssessed():
                return AssessmentEntry(
                    version=version,
                    event="candidate",
                    submission_id=event.submission_id,
                    score=event.score,
                    failures=event.failures if event.error is None else None,
                    episodes=len(event.episodes),
                    error=None if event.error is None else text(event.error),
                )
            case RunInterrupted():
                return HostEntry(version=version, event="interrupted", reason=text(event.reason))
            case RunResumed():
                return HostEntry(version=version, event="resumed", attempt=event.attempt)
            case RunFinished():
                return FinishedEntry(
                    version=version,
                    reason=event.reason,
                    final_submission_id=event.final_submission_id,
                    validation_score=event.validation_score,
                    assessment_score=event.assessment_score,
                    handoff=self.summary.handoff,
                    improved=self.summary.improved,
                )
        return None

    def _assessment_entry(
        self, version: int, event: AssessmentStarted | AssessmentCompleted | AssessmentFailed
    ) -> AssessmentEntry:
        if isinstance(event, AssessmentStarted):
            return AssessmentEntry(
                version=version,
                event="started",
                submission_id=event.submission_id,
                split=event.split,
                episodes=event.episodes,
            )
        if isinstance(event, AssessmentCompleted):
            return AssessmentEntry(
                version=version,
                event="completed",
                submission_id=event.submission_id,
                score=event.score,
                failures=event.failures,
                episodes=len(event.episodes),
            )
        return AssessmentEntry(
            version=version, event="failed", error=self.private.scrub(event.error)
        )

    def finish(self) -> Replay:
        replay, summary = self.replay, self.summary
        replay.terminal_reason = summary.terminal_reason
        replay.benchmark_id = summary.benchmark_id
        replay.score_direction = summary.score_direction
        replay.episode_budget = summary.episode_budget
        replay.budget_used = summary.budget_used
        if replay.episode_budget is not None:
            replay.budget_left = replay.episode_budget - replay.budget_used
        replay.submissions = summary.started
        replay.published = summary.published
        replay.failed = summary.failed
        replay.rejections = summary.rejections
        replay.agent_attempts = summary.agent_attempts
        replay.best_submission_id = summary.best_submission_id
        replay.final_submission_id = summary.final_submission_id
        replay.assessment_score = summary.assessment_score
        if replay.events == 0:
            replay.status = "empty"
        elif self.last_type == "RunFinished":
            replay.status = "finished"
        elif self.last_type == "RunInterrupted":
            replay.status = "interrupted"
        else:
            replay.status = "in progress"
        return replay


def replay_run(store: Store, run_id: str) -> Replay:
    """Replay the Run ``run_id`` (its id or ``run-<id>``) from the log: its timeline, totals
    and every problem found (none when the Run verifies)."""
    stream_id = stream_of(run_id)
    builder = _Builder(store, stream_id)
    for envelope in store.events.read_stream(stream_id, 0):
        builder.add(envelope)
    return builder.finish()
