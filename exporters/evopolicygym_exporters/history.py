"""One Run's history as exporters need it, read from its stream one Run at a time.

``read_histories`` walks the Run streams and yields a ``RunHistory`` per
finished Run that passes the filters, so an export holds one Run in memory
however many the store has. What happened in the Run is its ``RunSummary`` (the Run
read API's one fold); a history adds what only exporters read: transcripts by Agent
attempt, each Submission's Episodes, and where in the transcript each Submission was
asked for (the context a preference pair's prompt ends at).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evopolicygym.records.events import (
    AgentMessages,
    AgentStarted,
    EpisodeCompleted,
    EvaluationStarted,
    EventCodecError,
    RunCreated,
    RunFinished,
)
from evopolicygym.records.location import Store
from evopolicygym.records.runs import RUN_PREFIX, RunSummary, SubmissionSummary, better, run_id_of
from evopolicygym.transcript import AgentIdentity, Message

__all__ = [
    "RunFilter",
    "RunHistory",
    "SubmissionHistory",
    "read_histories",
    "read_history",
    "trainer_step",
]


def trainer_step(agent: AgentIdentity) -> int | None:
    """The trainer's step a training Run was made at (``options["trainer_step"]`` of its
    agent, provider ``trainer``, where the trainer told it); None for every other Run."""
    step = agent.options.get("trainer_step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


@dataclass
class SubmissionHistory:
    """A Submission as the Run read API summarizes it, with what only exporters need: its
    Episodes, the Agent attempt that asked for it and where in that attempt's transcript."""

    summary: SubmissionSummary
    attempt: int  # the Agent attempt that asked for it (0: none recorded)
    transcript_mark: int  # messages of that attempt recorded before it was asked for
    episodes: list[EpisodeCompleted] = field(default_factory=list)

    @property
    def submission_id(self) -> int:
        return self.summary.submission_id

    @property
    def program_digest(self) -> str:
        assert self.summary.program_digest is not None  # set by its EvaluationStarted
        return self.summary.program_digest

    @property
    def parent_program_digest(self) -> str | None:
        return self.summary.parent_program_digest

    @property
    def indices(self) -> list[int]:
        return self.summary.indices

    @property
    def budget_used(self) -> int:
        return self.summary.budget_used or 0

    @property
    def started_at(self) -> int:
        return self.summary.started_at or 0

    @property
    def published(self) -> bool:
        return self.summary.status == "published"

    @property
    def score(self) -> float | None:
        return self.summary.score if self.published else None


@dataclass
class RunHistory:
    """One finished Run: its summary, the events exporters quote (RunCreated, RunFinished),
    its transcripts by Agent attempt and its Submissions with their Episodes."""

    summary: RunSummary
    created: RunCreated
    finished: RunFinished
    last_position: int
    transcripts: dict[int, list[Message]] = field(default_factory=dict)
    submissions: list[SubmissionHistory] = field(default_factory=list)
    # The tools each Agent attempt was offered, where its AgentStarted records them exactly
    # (the built-in agents); None for an attempt whose tools only its calls tell.
    offered_tools: dict[int, list[dict[str, Any]] | None] = field(default_factory=dict)
    # The error records of each attempt (role "error"), kept out of ``transcripts``.
    agent_errors: dict[int, list[Message]] = field(default_factory=dict)
    # The Submissions' parents and matched comparisons (``outcomes.lineage_of``), once computed.
    lineage: Any = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def stream_id(self) -> str:
        return self.summary.stream_id

    @property
    def created_at(self) -> int:
        return self.summary.created_at or 0

    @property
    def direction(self) -> str:
        return self.summary.score_direction

    def better(self, a: float | None, b: float | None) -> bool:
        """Whether score ``a`` beats ``b`` in the Benchmark's direction."""
        return better(a, b, self.direction)

    @property
    def published(self) -> list[SubmissionHistory]:
        return [s for s in self.submissions if s.published]

    @property
    def best_train_score(self) -> float | None:
        return self.summary.best_score

    @property
    def final_score(self) -> float | None:
        """The held-out (Assessment) score of the final program, when it was measured."""
        return self.finished.assessment_score

    @property
    def success(self) -> bool:
        """Finished, the Agent handed off, and the final program beat the initial one on
        the same Validation Episodes (``RunSummary.success``)."""
        return self.summary.success

    @property
    def handoff(self) -> str:
        """Who named the Validation candidates: ``agent``, ``host`` (nomination) or ``none``."""
        return self.summary.handoff

    @property
    def improved(self) -> bool | None:
        """Whether the final program beat the initial one on the same Validation Episodes
        (None where that was not measured)."""
        return self.summary.improved

    @property
    def reference_score(self) -> float | None:
        """The initial program's Validation score, where it was measured."""
        return self.summary.reference_score

    @property
    def task_text(self) -> str | None:
        """The task as the Host gave it: the system message opening the first transcript."""
        for attempt in sorted(self.transcripts):
            messages = self.transcripts[attempt]
            if messages and messages[0].role == "system":
                return messages[0].content
        return None


_SUBMISSION_ID = re.compile(r'"submission_id"\s*:\s*(\d+)\b')


def _reply_indices(transcript: list[Message]) -> dict[int, int]:
    """For each Submission id a tool result names (as the session's reply does), the index
    of the first such result: one pass over the transcript."""
    found: dict[int, int] = {}
    for i, message in enumerate(transcript):
        if message.role == "tool":
            for number in _SUBMISSION_ID.findall(message.content):
                found.setdefault(int(number), i)
    return found


@dataclass(frozen=True)
class RunFilter:
    benchmark: tuple[str, ...] = ()
    agent: tuple[str, ...] = ()  # an agent's name, provider or model
    terminal_reason: tuple[str, ...] = ()
    min_score: float | None = None  # final score at least this good, in the Benchmark's direction
    since: dt.datetime | None = None  # Runs created at or after
    # Training Runs made at a trainer step in [first, stop) (None: unbounded on that side);
    # a Run with no trainer step is left out when this is given.
    trainer_step: tuple[int | None, int | None] | None = None

    def admits_created(self, created: RunCreated, at: int) -> bool:
        if self.benchmark and created.benchmark_id not in self.benchmark:
            return False
        agent = created.agent
        if self.agent and not {agent.name, agent.provider, agent.model} & set(self.agent):
            return False
        if self.trainer_step is not None:
            step = trainer_step(agent)
            first, stop = self.trainer_step
            if (
                step is None
                or (first is not None and step < first)
                or (stop is not None and step >= stop)
            ):
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
            "trainer_step": None if self.trainer_step is None else list(self.trainer_step),
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
    for info in store.events.streams(RUN_PREFIX):
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
    if (
        first is None
        or first.type != "RunCreated"
        or (until is not None and first.position > until)
    ):
        return None
    created = first.event()
    assert isinstance(created, RunCreated)
    if not run_filter.admits_created(created, first.recorded_at):
        return None
    summary = RunSummary(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id)
    summary.apply(created, version=first.stream_version, at=first.recorded_at)
    transcripts: dict[int, list[Message]] = {}
    offered: dict[int, list[dict[str, Any]] | None] = {}
    faults: dict[int, list[Message]] = {}
    recorded: dict[int, list[Message]] = {}
    extras: dict[int, SubmissionHistory] = {}
    attempt = 0
    finished: RunFinished | None = None
    last = first.position
    for envelope in envelopes:
        if until is not None and envelope.position > until:
            break
        last = envelope.position
        event = envelope.event()
        summary.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
        match event:
            case AgentStarted():
                attempt = event.attempt
                transcripts.setdefault(attempt, [])
                offered[attempt] = event.tools
            case AgentMessages() if event.source is not None:
                # The attempt as the CLI's own session record holds it (the model's exact
                # calls, per-response usage): taken instead of the live stream's chunks.
                recorded[event.attempt] = [m for m in event.messages if m.role != "error"]
                if event.tools is not None and offered.get(event.attempt) is None:
                    offered[event.attempt] = event.tools  # the CLI's own list
            case AgentMessages():
                # Error records (API errors, "Not logged in") are failures the CLI reported,
                # not turns: no conversation an exporter writes holds them.
                kept = [m for m in event.messages if m.role != "error"]
                transcripts.setdefault(event.attempt, []).extend(kept)
                faults.setdefault(event.attempt, []).extend(
                    m for m in event.messages if m.role == "error"
                )
            case EvaluationStarted():
                extras[event.submission_id] = SubmissionHistory(
                    summary=summary.submission(event.submission_id),
                    attempt=attempt,
                    transcript_mark=len(transcripts.get(attempt, ())),
                )
            # Episodes of a Submission never started are ignored, as the workspace does.
            case EpisodeCompleted() if event.submission_id in extras:
                extras[event.submission_id].episodes.append(event)
            case RunFinished():
                finished = event
    if finished is None:  # still running or interrupted: nothing final to export yet
        return None
    for number, messages in recorded.items():
        live = transcripts.get(number, [])
        transcripts[number] = live[:1] + messages if live and live[0].role == "system" else messages
    replies = {number: _reply_indices(messages) for number, messages in transcripts.items()}
    for extra in extras.values():
        # Where the Submission's reply is in the transcript: the call before it asked for it.
        # The live mark is taken when the evaluation starts, which is before a CLI that
        # prints a call only with its result has printed it, and indexes the live stream.
        found = replies.get(extra.attempt, {}).get(extra.submission_id)
        if found is not None:
            extra.transcript_mark = found
    return RunHistory(
        summary=summary,
        created=created,
        finished=finished,
        last_position=last,
        transcripts=transcripts,
        submissions=[extras[k] for k in sorted(extras)],
        offered_tools=offered,
        agent_errors=faults,
    )
