"""One Run's history as exporters need it, read from its stream one Run at a time.

``read_histories`` walks the Run streams and yields a ``RunHistory`` per
finished Run that passes the filters, so an export holds one Run in memory
however many the store has. A history keeps the events an exporter reads
(transcripts by Agent attempt, Submissions with their Episodes, the outcome),
and where in the transcript each Submission was asked for: the context a
preference pair's prompt ends at.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evopolicygym.records.events import (
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    EventCodecError,
    FinalSubmissionSelected,
    FinishAccepted,
    RunCreated,
    RunFinished,
    SubmissionPublished,
    SubmissionRejected,
)
from evopolicygym.records.location import Store
from evopolicygym.transcript import Message

__all__ = [
    "FAILED_REASONS",
    "RunFilter",
    "RunHistory",
    "SubmissionHistory",
    "read_histories",
    "read_history",
]

# Terminal reasons that mean the Run did not produce a measured final program.
FAILED_REASONS = frozenset(
    {"agent_failed", "evaluation_failed", "validation_failed", "assessment_failed", "interrupted"}
)


@dataclass
class SubmissionHistory:
    submission_id: int
    program_digest: str
    parent_program_digest: str | None
    indices: list[int]
    budget_used: int
    started_at: int  # ns since the epoch, as recorded
    attempt: int  # the Agent attempt that asked for it (0: none recorded)
    transcript_mark: int  # messages of that attempt recorded before it was asked for
    episodes: list[EpisodeCompleted] = field(default_factory=list)
    published: SubmissionPublished | None = None
    failed: EvaluationFailed | None = None
    validation: CandidateValidated | None = None

    @property
    def score(self) -> float | None:
        return None if self.published is None else self.published.score


@dataclass
class RunHistory:
    run_id: str
    stream_id: str
    created: RunCreated
    created_at: int
    finished: RunFinished
    finished_at: int
    last_position: int
    transcripts: dict[int, list[Message]] = field(default_factory=dict)
    submissions: list[SubmissionHistory] = field(default_factory=list)
    rejections: int = 0
    finish: FinishAccepted | None = None
    final: FinalSubmissionSelected | None = None
    assessment: AssessmentCompleted | None = None

    @property
    def direction(self) -> str:
        return str(self.created.benchmark_spec.get("score_direction", "maximize"))

    def better(self, a: float, b: float) -> bool:
        """Whether score ``a`` beats ``b`` in the Benchmark's direction."""
        return a > b if self.direction == "maximize" else a < b

    @property
    def published(self) -> list[SubmissionHistory]:
        return [s for s in self.submissions if s.published is not None]

    @property
    def best_train_score(self) -> float | None:
        best: float | None = None
        for s in self.published:
            assert s.score is not None
            if best is None or self.better(s.score, best):
                best = s.score
        return best

    @property
    def final_score(self) -> float | None:
        """The held-out (Assessment) score of the final program, when it was measured."""
        return self.finished.assessment_score

    @property
    def success(self) -> bool:
        """A final program was selected and measured, and the Run ended without a fault."""
        return (
            self.finished.reason not in FAILED_REASONS
            and self.finished.final_submission_id is not None
            and self.finished.assessment_score is not None
        )

    @property
    def task_text(self) -> str | None:
        """The task as the Host gave it: the system message opening the first transcript."""
        for attempt in sorted(self.transcripts):
            messages = self.transcripts[attempt]
            if messages and messages[0].role == "system":
                return messages[0].content
        return None


@dataclass(frozen=True)
class RunFilter:
    benchmark: tuple[str, ...] = ()
    agent: tuple[str, ...] = ()  # an agent's name, provider or model
    terminal_reason: tuple[str, ...] = ()
    min_score: float | None = None  # final score at least this good, in the Benchmark's direction
    since: dt.datetime | None = None  # Runs created at or after

    def admits_created(self, created: RunCreated, at: int) -> bool:
        if self.benchmark and created.benchmark_id not in self.benchmark:
            return False
        agent = created.agent
        if self.agent and not {agent.name, agent.provider, agent.model} & set(self.agent):
            return False
        return self.since is None or at >= int(self.since.timestamp() * 1e9)

    def admits(self, run: RunHistory) -> bool:
        if self.terminal_reason and run.finished.reason not in self.terminal_reason:
            return False
        if self.min_score is not None:
            score = run.final_score
            if score is None or run.better(self.min_score, score):
                return False
        return True

    def describe(self) -> dict[str, Any]:
        """The filter as plain values, for the dataset card and the fingerprint."""
        return {
            "benchmark": list(self.benchmark),
            "agent": list(self.agent),
            "terminal_reason": list(self.terminal_reason),
            "min_score": self.min_score,
            "since": None if self.since is None else self.since.isoformat(),
        }


def read_histories(
    store: Store,
    run_filter: RunFilter,
    on_stream: Callable[[], None] | None = None,
    until: int | None = None,
    on_skip: Callable[[str, str], None] | None = None,
) -> Iterator[RunHistory]:
    """Finished Runs passing ``run_filter``, in stream order; ``on_stream`` is called per Run read.

    Stream order (the Run ids sorted) is fixed for a given log, which is all a
    byte-identical export needs, and costs no extra pass over the streams. With
    ``until``, the log is read as it was at that position: a Run finished later
    is not finished yet. A stream that cannot be read (an event of a type or version this
    code does not know) is reported to ``on_skip(stream, reason)`` and left out.
    """
    for info in store.events.streams("run-"):
        try:
            history = _read(store, info.stream_id, run_filter, until)
        except EventCodecError as exc:
            if on_skip is not None:
                on_skip(info.stream_id, str(exc))
            history = None
        if on_stream is not None:
            on_stream()
        if history is not None and run_filter.admits(history):
            yield history


def read_history(store: Store, stream_id: str, until: int | None = None) -> RunHistory | None:
    """One Run's history (None if it had not finished by ``until``)."""
    return _read(store, stream_id, RunFilter(), until)


def _read(
    store: Store, stream_id: str, run_filter: RunFilter, until: int | None
) -> RunHistory | None:
    envelopes = iter(store.events.read_stream(stream_id, 0))
    first = next(envelopes, None)
    if first is None or first.type != "RunCreated" or (until is not None and first.position > until):
        return None
    created = first.event()
    assert isinstance(created, RunCreated)
    if not run_filter.admits_created(created, first.recorded_at):
        return None
    transcripts: dict[int, list[Message]] = {}
    submissions: dict[int, SubmissionHistory] = {}
    run: dict[str, Any] = {"rejections": 0}
    attempt = 0
    finished: tuple[RunFinished, int] | None = None
    last = first.position
    for envelope in envelopes:
        if until is not None and envelope.position > until:
            break
        last = envelope.position
        event = envelope.event()
        match event:
            case AgentStarted():
                attempt = event.attempt
                transcripts.setdefault(attempt, [])
            case AgentMessages():
                transcripts.setdefault(event.attempt, []).extend(event.messages)
            case EvaluationStarted():
                submissions[event.submission_id] = SubmissionHistory(
                    submission_id=event.submission_id,
                    program_digest=event.program_digest,
                    parent_program_digest=event.parent_program_digest,
                    indices=list(event.indices),
                    budget_used=event.budget_used,
                    started_at=envelope.recorded_at,
                    attempt=attempt,
                    transcript_mark=len(transcripts.get(attempt, ())),
                )
            # Events of a Submission never started are ignored, as the workspace does.
            case EpisodeCompleted() if event.submission_id in submissions:
                submissions[event.submission_id].episodes.append(event)
            case SubmissionPublished() if event.submission_id in submissions:
                submissions[event.submission_id].published = event
            case EvaluationFailed() if event.submission_id in submissions:
                submissions[event.submission_id].failed = event
            case CandidateValidated() if event.submission_id in submissions:
                submissions[event.submission_id].validation = event
            case SubmissionRejected():
                run["rejections"] += 1
            case FinishAccepted():
                run["finish"] = event
            case FinalSubmissionSelected():
                run["final"] = event
            case AssessmentCompleted():
                run["assessment"] = event
            case RunFinished():
                finished = (event, envelope.recorded_at)
    if finished is None:  # still running or interrupted: nothing final to export yet
        return None
    return RunHistory(
        run_id=created.run_id,
        stream_id=stream_id,
        created=created,
        created_at=first.recorded_at,
        finished=finished[0],
        finished_at=finished[1],
        last_position=last,
        transcripts=transcripts,
        submissions=[submissions[k] for k in sorted(submissions)],
        **run,
    )
