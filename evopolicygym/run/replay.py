"""Replay a Run from its log: fold it, check its part of the chain and its blobs, and lay out
what happened as a timeline (``reevaluate`` re-runs its scores).

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

from typing import Any, Literal, TypeAlias

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
from evopolicygym.records.verify import BlobChecker, referenced_blobs
from evopolicygym.run.config import RunConfigError
from evopolicygym.run.decider import (
    InvalidTransition,
    RunState,
    evolve,
    terminal_reason,
)

__all__ = [
    "AgentEntry",
    "AssessmentEntry",
    "CandidateEntry",
    "CreatedEntry",
    "FinishEntry",
    "FinishedEntry",
    "HostEntry",
    "ReferenceEntry",
    "RejectionEntry",
    "Replay",
    "ReplayError",
    "ReplayProblem",
    "SelectionEntry",
    "SubmissionEntry",
    "TimelineEntry",
    "ValidationEntry",
    "decoded",
    "replay_run",
    "stream_of",
]

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


class _Entry(msgspec.Struct, kw_only=True, tag_field="kind"):
    version: int  # the stream version of the event the entry starts at


class CreatedEntry(_Entry, tag="created"):
    benchmark_id: str
    agent: str
    episode_budget: int | None
    pool_size: int


class SubmissionEntry(_Entry, tag="submission"):
    submission_id: int
    selector: str
    episodes: int
    program_digest: str
    status: Literal["evaluating", "published", "failed"] = "evaluating"
    score: float | None = None
    failures: int | None = None
    best_so_far: bool = False  # strictly better than every earlier published Submission
    # single, matched (every Submission so far on the same indices) or unmatched: whether
    # best_so_far compares like with like
    best_so_far_basis: str | None = None
    parent_program_digest: str | None = None  # the program the edit started from
    error: str | None = None
    completed_version: int | None = None


class RejectionEntry(_Entry, tag="rejection"):
    request: Literal["submit", "finish"]
    code: str
    message: str
    selector: str | None = None
    candidates: list[int] = []


class AgentEntry(_Entry, tag="agent"):
    event: Literal["started", "exited"]
    attempt: int
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    errors: int = 0  # error records of the attempt (API errors, a failed login)
    last_error: str | None = None


class FinishEntry(_Entry, tag="finish"):
    candidates: list[int]


class ValidationEntry(_Entry, tag="validation"):
    event: Literal["started", "failed"]
    candidates: list[int] = []
    split: str | None = None
    episodes: int | None = None
    error: str | None = None
    handoff: str | None = None  # who named the candidates (agent or host)


class ReferenceEntry(_Entry, tag="reference"):
    """The initial Program on the Validation Episodes: what the final one must beat."""

    score: float
    failures: int
    episodes: int


class CandidateEntry(_Entry, tag="candidate"):
    submission_id: int
    score: float
    failures: int
    episodes: int


class SelectionEntry(_Entry, tag="selection"):
    submission_id: int
    score: float
    reason: str


class AssessmentEntry(_Entry, tag="assessment"):
    event: Literal["started", "completed", "failed", "candidate"]  # candidate: CandidateAssessed
    submission_id: int | None = None
    split: str | None = None
    episodes: int | None = None
    score: float | None = None
    failures: int | None = None
    error: str | None = None


class HostEntry(_Entry, tag="host"):
    event: Literal["interrupted", "resumed"]
    reason: str = ""
    attempt: int | None = None


class FinishedEntry(_Entry, tag="finished"):
    reason: str
    final_submission_id: int | None = None
    validation_score: float | None = None
    assessment_score: float | None = None
    handoff: str | None = None
    improved: bool | None = None


TimelineEntry: TypeAlias = (
    CreatedEntry
    | SubmissionEntry
    | RejectionEntry
    | AgentEntry
    | FinishEntry
    | ValidationEntry
    | ReferenceEntry
    | CandidateEntry
    | SelectionEntry
    | AssessmentEntry
    | HostEntry
    | FinishedEntry
)

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
        replay, text = self.replay, self.private.scrub
        entry: TimelineEntry | None = None
        match event:
            case RunCreated():
                entry = CreatedEntry(
                    version=version,
                    benchmark_id=event.benchmark_id,
                    agent=event.agent.name,
                    episode_budget=self.summary.episode_budget,
                    pool_size=recorded_pool_size(event) or 0,
                )
            case AgentStarted():
                entry = AgentEntry(version=version, event="started", attempt=event.attempt)
            case AgentExited():
                entry = AgentEntry(
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
                entry = RejectionEntry(
                    version=version,
                    request="submit",
                    code=event.code,
                    message=text(event.message),
                    selector=text(event.selector) if event.selector is not None else None,
                )
            case FinishRejected():
                entry = RejectionEntry(
                    version=version,
                    request="finish",
                    code=event.code,
                    message=text(event.message),
                    candidates=list(event.candidates),
                )
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
            case EpisodeCompleted():
                self.episodes.setdefault(event.submission_id, []).append(event.index)
            case SubmissionPublished():
                found = self.submissions.get(event.submission_id)
                if found is not None:
                    found.status = "published"
                    found.score = event.score
                    found.failures = event.failures
                    found.completed_version = version
                    # The summary has folded this event: is it the best published now?
                    found.best_so_far = self.summary.best_submission_id == event.submission_id
                    found.best_so_far_basis = self.summary.best_basis
            case EvaluationFailed():
                found = self.submissions.get(event.submission_id)
                if found is not None:
                    found.status = "failed"
                    found.error = text(event.error)
                    found.completed_version = version
            case FinishAccepted():
                entry = FinishEntry(version=version, candidates=list(event.candidates))
            case ValidationStarted():
                entry = ValidationEntry(
                    version=version,
                    event="started",
                    candidates=list(event.candidates),
                    split=event.split,
                    episodes=event.episodes,
                    handoff=self.summary.candidates_by,
                )
            case ReferenceValidated():
                entry = ReferenceEntry(
                    version=version,
                    score=event.score,
                    failures=event.failures,
                    episodes=len(event.episodes),
                )
            case CandidateValidated():
                entry = CandidateEntry(
                    version=version,
                    submission_id=event.submission_id,
                    score=event.score,
                    failures=event.failures,
                    episodes=len(event.episodes),
                )
            case ValidationFailed():
                entry = ValidationEntry(version=version, event="failed", error=text(event.error))
            case FinalSubmissionSelected():
                entry = SelectionEntry(
                    version=version,
                    submission_id=event.submission_id,
                    score=event.score,
                    reason=text(event.reason),
                )
            case AssessmentStarted():
                entry = AssessmentEntry(
                    version=version,
                    event="started",
                    submission_id=event.submission_id,
                    split=event.split,
                    episodes=event.episodes,
                )
            case AssessmentCompleted():
                entry = AssessmentEntry(
                    version=version,
                    event="completed",
                    submission_id=event.submission_id,
                    score=event.score,
                    failures=event.failures,
                    episodes=len(event.episodes),
                )
            case AssessmentFailed():
                entry = AssessmentEntry(version=version, event="failed", error=text(event.error))
            case CandidateAssessed():
                entry = AssessmentEntry(
                    version=version,
                    event="candidate",
                    submission_id=event.submission_id,
                    score=event.score,
                    failures=event.failures if event.error is None else None,
                    episodes=len(event.episodes),
                    error=None if event.error is None else text(event.error),
                )
            case RunInterrupted():
                entry = HostEntry(version=version, event="interrupted", reason=text(event.reason))
            case RunResumed():
                entry = HostEntry(version=version, event="resumed", attempt=event.attempt)
            case RunFinished():
                entry = FinishedEntry(
                    version=version,
                    reason=event.reason,
                    final_submission_id=event.final_submission_id,
                    validation_score=event.validation_score,
                    assessment_score=event.assessment_score,
                    handoff=self.summary.handoff,
                    improved=self.summary.improved,
                )
            case _:
                pass  # AgentMessages: the transcript, not part of the timeline
        if entry is not None:
            replay.timeline.append(entry)

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
