"""The Run read API: what happened in a Run, folded once from its stream.

- Stream ids: one stream per Run, ``run-<id>`` (``run_stream_id``, ``run_id_of``), and
  ``resolve_run`` for a Run named by a user as ``<id>``, ``run-<id>``, ``latest``
  (``latest_run``) or a unique prefix of an id.
- ``better(a, b, direction)``: whether score ``a`` beats ``b`` in a Benchmark's
  direction; the one comparison every reader uses.
- ``RunSummary``: the public facts of a Run (who, what, budget, each Submission, the
  best published one, the final program, Validation and Assessment scores, how it
  ended), folded event by event by ``RunSummary.apply``. ``summarize`` folds a whole
  stream; ``overview`` only its first and last events (enough for a listing);
  the read models fold the same ``apply`` over the log's pages, and exporters and
  replay build on it. ``program_of`` looks up a Run's initial, final or N-th Program.

Reading never writes, and a summary holds no Host-private value: ``config`` keeps the
config as recorded (its seed included, which ``public_config`` leaves out), and
Validation and Assessment are kept as scores only, never their Episodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    CandidateAssessed,
    CandidateValidated,
    Envelope,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    EventCodecError,
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
)
from evopolicygym.records.pools import recorded_pool_size
from evopolicygym.records.store import EventStore, StreamInfo
from evopolicygym.transcript import AgentIdentity

__all__ = [
    "FAILED_REASONS",
    "LATEST",
    "PRIVATE_KEYS",
    "RUN_PREFIX",
    "AmbiguousRun",
    "RunSummary",
    "SubmissionSummary",
    "UnknownRun",
    "better",
    "latest_run",
    "overview",
    "program_of",
    "public",
    "resolve_run",
    "run_id_of",
    "run_stream_id",
    "summarize",
]

RUN_PREFIX = "run-"

# Terminal reasons that mean a fault ended the Run, or it never ended.
FAILED_REASONS = frozenset(
    {"agent_failed", "evaluation_failed", "validation_failed", "assessment_failed", "interrupted"}
)
# Host-private keys of recorded values (RunCreated.pool, .pool_blob and .seeds, the Run
# config's seed): never shown by a reader.
PRIVATE_KEYS = frozenset({"pool", "pool_blob", "seeds", "seed"})


class UnknownRun(LookupError):
    """No Run of that id in the store."""


# --------------------------------------------------------------------------- ids and scores


def run_stream_id(run_id: str) -> str:
    """The stream of the Run ``run_id``."""
    return RUN_PREFIX + run_id


def run_id_of(stream_id: str) -> str | None:
    """The Run id of a Run stream, None for any other stream."""
    return stream_id[len(RUN_PREFIX) :] if stream_id.startswith(RUN_PREFIX) else None


def better(a: float | None, b: float | None, direction: str) -> bool:
    """Whether score ``a`` strictly beats ``b`` in ``direction`` (``maximize`` or
    ``minimize``). Any score beats none; NaN and None never beat anything; equal scores
    do not beat each other, so the earlier of equals is kept."""
    if a is None or math.isnan(a):
        return False
    if b is None or math.isnan(b):
        return True
    return a < b if direction == "minimize" else a > b


def public(value: Any) -> Any:
    """``value`` without Host-private keys at any depth (a Run's config holds its seed)."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if k not in PRIVATE_KEYS}
    if isinstance(value, list):
        return [public(v) for v in value]
    return value


# --------------------------------------------------------------------------- the summary

SubmissionStatus = Literal["evaluating", "published", "failed"]


@dataclass
class SubmissionSummary:
    """One Submission as its events tell it. Times are ns since the epoch, as recorded."""

    submission_id: int
    program_digest: str | None = None
    parent_program_digest: str | None = None
    parent_submission_id: int | None = None  # the parent the Agent named (0: the initial program)
    indices: list[int] = field(default_factory=list)
    budget_reserved: int | None = None
    budget_used: int | None = None  # the Run's, after this Submission's reservation
    started_at: int | None = None
    status: SubmissionStatus = "evaluating"
    score: float | None = None
    failures: int | None = None
    published_at: int | None = None
    episodes: int = 0  # EpisodeCompleted so far
    error: str | None = None
    budget_consumed: int | None = None
    validation_score: float | None = None
    validation_failures: int | None = None
    # Its held-out Assessment: the selected one's, or (``assessment.candidates``) any other
    # validated candidate's on the same Episodes. ``assessment_failed`` where a candidate's
    # could not be run (its error text stays with the Host, as a failed Assessment's does).
    assessment_score: float | None = None
    assessment_failures: int | None = None
    assessment_failed: bool | None = None
    updated_at: int | None = None

    def apply(self, event: Event, at: int | None = None) -> None:
        """Fold one of this Submission's events (recorded at ``at`` ns). Validation and
        Assessment come in as scores only: their Episodes' seeds are Host-private."""
        match event:
            case EvaluationStarted():
                self.program_digest = event.program_digest
                self.parent_program_digest = event.parent_program_digest
                self.parent_submission_id = event.parent_submission_id
                self.indices = list(event.indices)
                self.budget_reserved = event.budget_reserved
                self.budget_used = event.budget_used
                self.started_at = at
                self.status = "evaluating"
            case EpisodeCompleted():
                self.episodes += 1
                return  # an Episode is not a change of the Submission's own record
            case SubmissionPublished():
                self.program_digest = event.program_digest
                self.status = "published"
                self.score = event.score
                self.failures = event.failures
                self.published_at = at
            case EvaluationFailed():
                self.status = "failed"
                self.error = event.error
                self.budget_consumed = event.budget_consumed
            case CandidateValidated():
                self.validation_score = event.score
                self.validation_failures = event.failures
            case AssessmentCompleted():
                self.assessment_score = event.score
                self.assessment_failures = event.failures
                self.assessment_failed = False
            case CandidateAssessed():
                self.assessment_score = event.score
                self.assessment_failed = event.error is not None
                self.assessment_failures = None if self.assessment_failed else event.failures
            case _:
                return
        self.updated_at = at


@dataclass
class RunSummary:
    """A Run's public facts, folded by ``apply`` one event at a time.

    Counters (``started``, ``published``, ``failed``) and the best published Submission
    are kept apart from ``submissions``, so a summary that starts from a read-model row
    (which keeps no per-Submission detail) folds later events the same way.
    """

    run_id: str
    stream_id: str
    events: int = 0  # the stream version folded so far
    created_at: int | None = None
    updated_at: int | None = None
    benchmark_id: str | None = None
    benchmark_spec: dict[str, Any] | None = None
    score_direction: str = "maximize"
    agent: AgentIdentity | None = None
    config: dict[str, Any] | None = None  # as recorded: Host-private seed included
    pool_size: int | None = None
    environment_digest: str | None = None
    initial_program_digest: str | None = None
    skill_program_digests: list[str] = field(default_factory=list)
    agent_containment: str | None = None
    budget_used: int = 0
    budget_left: int | None = None  # the budget less what is reserved (None: no budget known)
    submissions: dict[int, SubmissionSummary] = field(default_factory=dict)
    started: int = 0  # evaluations started
    published: int = 0
    failed: int = 0
    rejected_submissions: int = 0  # submit requests refused before evaluation
    rejected_finishes: int = 0
    agent_attempts: int = 0
    agent_exits: int = 0
    agent_errors: int = 0  # error records of the Agent's CLI (API errors, a failed login)
    last_agent_error: str | None = None
    unknown_stream_kinds: dict[str, int] = field(default_factory=dict)  # lines no parser knew
    finish_candidates: list[int] | None = None
    best_submission_id: int | None = None  # the best published Submission (see _rank)
    best_score: float | None = None
    # What the best rests on: ``single`` (one Submission so far), ``matched`` (every
    # Submission ran on the same indices, ``published_indices``) or ``unmatched`` (scores
    # taken on different Episodes: a reference point, not a comparison). Told from every
    # Submission started, so it holds across the read models' batches.
    best_basis: str | None = None
    published_indices: list[int] | None = None
    final_submission_id: int | None = None
    final_program_digest: str | None = None
    final_score: float | None = None  # the selected Submission's Validation score
    final_reason: str | None = None
    validation_error: str | None = None
    assessment_submission_id: int | None = None
    assessment_score: float | None = None
    assessment_failures: int | None = None
    assessment_episodes: int | None = None
    assessment_error: str | None = None
    candidates_by: str | None = None  # who named the Validation candidates: agent or host
    reference_score: float | None = None  # the initial Program's Validation score (rules 2)
    terminal_reason: str | None = None
    terminal_validation_score: float | None = None
    terminal_assessment_score: float | None = None
    terminal_handoff: str | None = None  # as RunFinished records it (rules 2)
    terminal_improved: bool | None = None
    finished_at: int | None = None
    interrupted: bool = False  # RunInterrupted not (yet) followed by RunResumed
    undecodable: list[int] = field(default_factory=list)  # positions of payloads that do not decode

    # ------------------------------------------------------------------ derived

    @property
    def created(self) -> bool:
        return self.benchmark_id is not None

    @property
    def finished(self) -> bool:
        return self.terminal_reason is not None

    @property
    def episode_budget(self) -> int | None:
        budget = (self.config or {}).get("episode_budget")
        return budget if isinstance(budget, int) and not isinstance(budget, bool) else None

    @property
    def validation_enabled(self) -> bool:
        validation = (self.config or {}).get("validation")
        return not isinstance(validation, dict) or validation.get("enabled", True) is not False

    @property
    def status(self) -> str:
        """``empty``, ``running``, ``interrupted`` or the terminal reason. A Run whose Host
        died without a word reads ``running`` here: only the Host's lock tells (see
        ``run.liveness``)."""
        if self.terminal_reason is not None:
            return self.terminal_reason
        if self.events == 0:
            return "empty"
        return "interrupted" if self.interrupted else "running"

    @property
    def rejections(self) -> int:
        return self.rejected_submissions + self.rejected_finishes

    @property
    def first_published(self) -> SubmissionSummary | None:
        return next((s for s in self.submissions.values() if s.status == "published"), None)

    @property
    def handoff(self) -> str:
        """Who named the candidates: ``agent`` (an accepted finish), ``host`` (nomination)
        or ``none`` (no final Program). Recorded by rules 2; told from the events before."""
        if self.terminal_handoff is not None:
            return self.terminal_handoff
        if self.finish_candidates is not None:
            return "agent"
        if self.candidates_by is not None or self.final_submission_id is not None:
            return "host"
        return "none"

    @property
    def improved(self) -> bool | None:
        """Whether the final Program beat the initial one on the same Validation Episodes;
        None where that was not measured (no final Program, no Validation, rules 1)."""
        if self.terminal_improved is not None or self.terminal_reason is not None:
            return self.terminal_improved
        if self.final_score is None or self.reference_score is None:
            return None
        return better(self.final_score, self.reference_score, self.score_direction)

    @property
    def success(self) -> bool:
        """Finished (the Agent handed off and no fault followed), and the final Program
        improved on the initial one."""
        return (
            self.terminal_reason == "finished" and self.handoff == "agent" and self.improved is True
        )

    def public_config(self) -> dict[str, Any] | None:
        return None if self.config is None else public(self.config)

    def submission(self, submission_id: int) -> SubmissionSummary:
        found = self.submissions.get(submission_id)
        if found is None:
            found = self.submissions[submission_id] = SubmissionSummary(submission_id)
        return found

    # ------------------------------------------------------------------ the fold

    def apply(self, event: Event, *, version: int | None = None, at: int | None = None) -> None:
        """Fold ``event`` (recorded at ``at`` ns, stream version ``version``)."""
        if version is not None:
            self.events = max(self.events, version)
        if at is not None:
            if self.created_at is None:
                self.created_at = at
            self.updated_at = at
        match event:
            case RunCreated():
                self._created(event, at)
            case AgentStarted():
                self.agent_attempts = max(self.agent_attempts, event.attempt)
            case AgentExited():
                self._agent_exited(event)
            case SubmissionRejected():
                self.rejected_submissions += 1
            case FinishRejected():
                self.rejected_finishes += 1
            case EvaluationStarted():
                self.started += 1
                self.budget_used = max(self.budget_used, event.budget_used)
                self._reserved()
                self._evidence(list(event.indices))
                self.submission(event.submission_id).apply(event, at)
            case EpisodeCompleted() | CandidateValidated() | CandidateAssessed():
                self.submission(event.submission_id).apply(event, at)
            case SubmissionPublished():
                self.published += 1
                self.budget_used = max(self.budget_used, event.budget_used)
                self.budget_left = event.budget_left
                self.submission(event.submission_id).apply(event, at)
                self._rank(event.submission_id, event.score)
            case EvaluationFailed():
                self.failed += 1
                self.submission(event.submission_id).apply(event, at)
            case FinishAccepted():
                self.finish_candidates = list(event.candidates)
            case ValidationStarted():
                if event.handoff is not None:
                    self.candidates_by = event.handoff
                else:  # rules 1: the Host nominated when no finish came first
                    self.candidates_by = "agent" if self.finish_candidates is not None else "host"
            case ReferenceValidated():
                self.reference_score = event.score
            case ValidationFailed():
                self.validation_error = event.error
            case FinalSubmissionSelected():
                self.final_submission_id = event.submission_id
                self.final_program_digest = event.program_digest
                self.final_score = event.score
                self.final_reason = event.reason
            case AssessmentCompleted():
                self.assessment_submission_id = event.submission_id
                self.assessment_score = event.score
                self.assessment_failures = event.failures
                self.assessment_episodes = len(event.episodes)
                self.submission(event.submission_id).apply(event, at)
            case AssessmentFailed():
                self.assessment_error = event.error
            case RunInterrupted():
                self.interrupted = True
            case RunResumed():
                self.interrupted = False
            case RunFinished():
                self._finished(event, at)
            case _:
                pass  # AgentMessages, AssessmentStarted: nothing public to fold

    def _created(self, event: RunCreated, at: int | None) -> None:
        # run_id stays the stream's: RunCreated naming another is a fault replay reports.
        self.benchmark_id = event.benchmark_id
        self.benchmark_spec = event.benchmark_spec
        self.score_direction = str(event.benchmark_spec.get("score_direction") or "maximize")
        self.agent = event.agent
        self.config = event.config
        self.pool_size = recorded_pool_size(event)
        self.environment_digest = event.environment_digest
        self.initial_program_digest = event.initial_program_digest
        self.skill_program_digests = list(event.skill_program_digests)
        self.agent_containment = event.agent_containment
        self._reserved()
        if at is not None:
            self.created_at = at

    def _agent_exited(self, event: AgentExited) -> None:
        self.agent_attempts = max(self.agent_attempts, event.attempt)
        self.agent_exits += 1
        self.agent_errors += event.errors
        self.last_agent_error = event.last_error or self.last_agent_error
        for kind, count in event.unknown_kinds.items():
            self.unknown_stream_kinds[kind] = self.unknown_stream_kinds.get(kind, 0) + count

    def _finished(self, event: RunFinished, at: int | None) -> None:
        self.terminal_reason = event.reason
        self.terminal_validation_score = event.validation_score
        self.terminal_assessment_score = event.assessment_score
        self.terminal_handoff = event.handoff
        self.terminal_improved = event.improved
        if event.reference_score is not None:
            self.reference_score = event.reference_score
        self.finished_at = at
        self.interrupted = False
        if event.final_submission_id is not None:
            self.final_submission_id = event.final_submission_id
        if event.validation_score is not None and self.final_score is None:
            self.final_score = event.validation_score
        if event.assessment_score is not None and self.assessment_score is None:
            self.assessment_score = event.assessment_score

    def _reserved(self) -> None:
        budget = self.episode_budget
        if budget is not None:
            self.budget_left = budget - self.budget_used

    def _evidence(self, indices: list[int]) -> None:
        """Whether the Submissions so far compare like with like (see ``best_basis``)."""
        if self.best_basis is None:
            self.best_basis, self.published_indices = "single", indices
        elif self.best_basis != "unmatched" and indices != self.published_indices:
            self.best_basis, self.published_indices = "unmatched", None
        elif self.best_basis == "single":
            self.best_basis = "matched"

    def _rank(self, submission_id: int, score: float) -> None:
        """Keep the best published Submission: the better score in the Benchmark's
        direction, the earlier of equals."""
        if better(score, self.best_score, self.score_direction):
            self.best_submission_id, self.best_score = submission_id, score

    def fold(self, envelopes: Iterable[Envelope]) -> RunSummary:
        """Fold ``envelopes`` of this Run's stream; a payload that does not decode is noted
        in ``undecodable`` (``record verify`` says why). Transcript chunks are not decoded:
        nothing of them is in a summary, and they are the bulk of a long Run."""
        for envelope in envelopes:
            self.events = max(self.events, envelope.stream_version)
            if envelope.type == AgentMessages.type_name():
                if self.created_at is None:
                    self.created_at = envelope.recorded_at
                self.updated_at = envelope.recorded_at
                continue
            try:
                event = envelope.event()
            except EventCodecError:
                self.undecodable.append(envelope.position)
                continue
            self.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
        return self


# --------------------------------------------------------------------------- reading a store


LATEST = "latest"  # a RUN naming the most recently created Run
_SHOWN_MATCHES = 5  # of an ambiguous prefix's Runs, named in its error


class AmbiguousRun(UnknownRun):
    """A prefix that more than one Run id starts with; ``matches`` holds their ids, sorted."""

    def __init__(self, run: str, matches: list[str]) -> None:
        shown = ", ".join(matches[:_SHOWN_MATCHES])
        more = f" and {len(matches) - _SHOWN_MATCHES} more" if len(matches) > _SHOWN_MATCHES else ""
        super().__init__(
            f"{run!r} is the start of {len(matches)} run ids ({shown}{more}): give more of one"
        )
        self.matches = matches


def resolve_run(events: EventStore, run: str) -> str:
    """The stream of the Run a user names as ``<id>``, ``run-<id>``, ``latest`` (the most
    recently created Run) or a unique prefix of an id; ``UnknownRun`` if there is none,
    ``AmbiguousRun`` (an ``UnknownRun``) if a prefix starts several ids. A whole id wins
    over ``latest`` and over being the prefix of a longer id."""
    if not run:
        raise UnknownRun("no run '' in the store")
    # The id as given first (run-<id> names the stream itself), then run-<given>.
    prefixes = [run] if run.startswith(RUN_PREFIX) else []
    prefixes.append(run_stream_id(run))
    found: dict[str, None] = {}
    for prefix in prefixes:
        found.update(dict.fromkeys(info.stream_id for info in events.streams(prefix)))
    for stream_id in prefixes:
        if stream_id in found:
            return stream_id
    if run == LATEST:
        latest = latest_run(events)
        if latest is not None:
            return latest
    if len(found) == 1:
        return next(iter(found))
    if found:
        raise AmbiguousRun(run, sorted(run_id_of(stream_id) or stream_id for stream_id in found))
    raise UnknownRun(f"no run {run!r} in the store")


def latest_run(events: EventStore) -> str | None:
    """The stream of the most recently created Run (whose first event is the last of any
    Run's first events in the log), None in a store of no Run. Read back from the log's head
    in growing pages: only the events after that Run's creation are read, however many
    Runs the store holds."""
    end = events.head()
    page = 256
    while end > 0:
        start = max(end - page, 0)
        rows = events.read_event_rows(start, end - start)
        # (position, stream_id, stream_version, ...): a Run stream's version 1 is its creation.
        for row in reversed(rows):
            if row[2] == 1 and str(row[1]).startswith(RUN_PREFIX):
                return str(row[1])
        end = start
        page = min(page * 4, 16_384)
    return None


def _new(stream_id: str) -> RunSummary:
    return RunSummary(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id)


def summarize(events: EventStore, stream_id: str) -> RunSummary:
    """The summary of the Run stream ``stream_id`` (see ``resolve_run``), read in full."""
    return _new(stream_id).fold(events.read_stream(stream_id, 0))


def overview(events: EventStore, info: StreamInfo) -> RunSummary:
    """A summary from the stream's first and last events only: who, what, when, how it
    ended. Cheap whatever the Run's length, which a listing of many Runs needs."""
    summary = _new(info.stream_id)
    # One event read each (limit=1): a page of a long stream would be read to keep one.
    first = next(iter(events.read_stream(info.stream_id, 0, limit=1)), None)
    envelopes = [first] if first is not None else []
    if info.version > 1:
        last = next(iter(events.read_stream(info.stream_id, info.version - 1, limit=1)), None)
        if last is not None and last.type in (RunFinished.type_name(), RunInterrupted.type_name()):
            envelopes.append(last)
    summary.fold(envelopes)
    summary.events = (
        info.version
    )  # stream versions are contiguous from 1 ('record verify' checks it)
    return summary


def program_of(
    summary: RunSummary, which: int | Literal["initial", "final"]
) -> tuple[str, int | str]:
    """The Program digest of ``which`` (a Submission id, ``initial`` or ``final``) and its
    label (``initial`` or the Submission id); LookupError says why there is none."""
    if which == "initial":
        if summary.initial_program_digest is None:
            raise LookupError(
                f"run {summary.run_id} has no RunCreated event, so no initial program"
            )
        return summary.initial_program_digest, "initial"
    if which == "final":
        if summary.final_submission_id is None or summary.final_program_digest is None:
            raise LookupError(f"run {summary.run_id} has no final submission (none selected yet)")
        return summary.final_program_digest, summary.final_submission_id
    entry = summary.submissions.get(which)
    # budget_reserved: set by the Submission's EvaluationStarted, which names its Program.
    if entry is None or entry.budget_reserved is None or entry.program_digest is None:
        started = [k for k, s in summary.submissions.items() if s.budget_reserved is not None]
        known = f"it has 1 to {max(started)}" if started else "it has none yet"
        raise LookupError(f"run {summary.run_id} has no submission {which} ({known})")
    return entry.program_digest, which
