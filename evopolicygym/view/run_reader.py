"""One Run as its page reads it: a bounded fold of its stream, caught up by new events only.

``RunReader`` reads the stream once, event by event, and keeps only what the page shows and
what stays small however long the Run: the ``RunSummary`` (every event applied), the Run's
``PrivateValues`` (to scrub shown text), each Submission's Episodes counted by status, the
public outcomes of Validation and Assessment, each Agent attempt's counts (messages, tool
calls, tokens, the tools offered, how it exited), the rejections (all counted, the last
``REJECTIONS_KEPT`` kept) and the last ``TIMELINE_KEPT`` lines of the timeline. No event and
no message is kept, so a Run of 100,000 events opens without being held in memory; later,
``catch_up`` folds only the events recorded since (``read_stream`` from the version reached).

``lineage`` (each Submission's parent, edit kind and best so far) reads the Run again through
the analysis frames (``report.run_data.lineage_of``), in a thread of its own: the page waits
for it a moment, and a long Run's page shows without it first rather than late. It is kept
until a Submission starts, publishes or fails, the only events that change it once settled.

``RunReaders`` keeps the readers of the last ``READERS`` Runs opened, the least recently
opened dropped. Every reader has a lock: fold and read it under ``reader.lock``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    EpisodeCompleted,
    Event,
    EventCodecError,
    FinishRejected,
    RunCreated,
    SubmissionRejected,
)
from evopolicygym.records.location import Store
from evopolicygym.records.private import PrivateValues
from evopolicygym.records.runs import RunSummary, run_id_of
from evopolicygym.records.timeline import event_text
from evopolicygym.report.run_data import (
    Lineage,
    Outcomes,
    TimelineEvent,
    fold_outcomes,
    lineage_of,
)
from evopolicygym.transcript import Message

__all__ = [
    "READERS",
    "REJECTIONS_KEPT",
    "TIMELINE_KEPT",
    "Attempt",
    "Rejection",
    "RunReader",
    "RunReaders",
    "Tokens",
]

log = logging.getLogger(__name__)

READERS = 16  # Runs kept folded, the most recently opened
REJECTIONS_KEPT = 50  # the last rejections kept (all are counted)
TIMELINE_KEPT = 20  # the last timeline lines kept (all are counted)


@dataclass
class Tokens:
    """Token usage summed over messages."""

    input: int = 0
    output: int = 0
    cached: int = 0
    reasoning: int = 0
    reported: int = 0  # messages that reported usage

    def add(self, messages: list[Message]) -> None:
        for message in messages:
            usage = message.usage
            if usage is None:
                continue
            self.input += usage.input_tokens
            self.output += usage.output_tokens
            self.cached += usage.cached_tokens
            self.reasoning += usage.reasoning_tokens
            self.reported += 1


@dataclass
class _Counts:
    """Messages of one source (the live stream, or the CLI's own record) of an attempt."""

    messages: int = 0
    errors: int = 0  # error records (role ``error``): not turns of the conversation
    tool_calls: int = 0
    tokens: Tokens = field(default_factory=Tokens)

    def add(self, messages: list[Message], *, errors: bool) -> None:
        """Count ``messages``; without ``errors``, error records are left out."""
        kept = messages if errors else [m for m in messages if m.role != "error"]
        self.messages += len(kept)
        self.errors += sum(m.role == "error" for m in kept)
        self.tool_calls += sum(len(m.tool_calls) for m in kept)
        self.tokens.add(kept)


@dataclass
class Attempt:
    """One Agent attempt in counts. Where the CLI's own record of the attempt was kept, it
    stands for the live chunks (as the exports and the report take it): the live stream's
    system prompt ahead of it and its error records after it."""

    attempt: int
    started_at: int | None = None
    tools: list[str] = field(default_factory=list)  # names of the tools offered
    exited: AgentExited | None = None
    exited_at: int | None = None
    live: _Counts = field(default_factory=_Counts)
    live_system_first: bool = False
    recorded: _Counts | None = None
    recorded_source: str | None = None

    @property
    def messages(self) -> int:
        if self.recorded is None:
            return self.live.messages
        return int(self.live_system_first) + self.recorded.messages + self.live.errors

    @property
    def errors(self) -> int:
        return self.live.errors

    @property
    def tool_calls(self) -> int:
        return (self.recorded or self.live).tool_calls

    @property
    def tokens(self) -> Tokens:
        return (self.recorded or self.live).tokens


@dataclass(frozen=True)
class Rejection:
    at: int
    request: str  # submit or finish
    code: str
    message: str  # recorded text: scrub before showing
    detail: str  # the selector or candidates asked for


def _tool_names(tools: list[dict[str, object]] | None) -> list[str]:
    names = []
    for tool in tools or []:
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        names.append(str(name) if name is not None else "?")
    return names


class RunReader:
    """The page's facts of the Run ``stream_id``, folded by ``catch_up``."""

    def __init__(self, store: Store, stream_id: str) -> None:
        self.store = store
        self.stream_id = stream_id
        self.lock = threading.Lock()
        self.summary = RunSummary(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id)
        self.private = PrivateValues()
        self.episodes: dict[int, Counter[str]] = {}  # by Submission: Episodes by status
        self.validation: dict[int, Outcomes] = {}  # by Submission
        self.reference: Outcomes | None = None  # the initial Program on the same Episodes
        self.validation_split: str | None = None
        self.validation_episodes: int | None = None
        self.assessment: Outcomes | None = None
        self.assessment_split: str | None = None
        # The other candidates on the Assessment Episodes; None where theirs failed.
        self.candidate_assessments: dict[int, Outcomes | None] = {}
        self.attempts: dict[int, Attempt] = {}
        self.rejections: deque[Rejection] = deque(maxlen=REJECTIONS_KEPT)
        self.timeline: deque[TimelineEvent] = deque(maxlen=TIMELINE_KEPT)
        self.timeline_total = 0
        self.undecodable = 0
        self._lineage: dict[int, Lineage] = {}
        self._lineage_key: tuple[int, ...] | None = None  # the Submission counts it was read at
        self._pending: tuple[tuple[int, ...], Future[dict[int, Lineage]]] | None = None

    @property
    def version(self) -> int:
        """The stream version folded so far."""
        return self.summary.events

    def catch_up(self) -> int:
        """Fold the events recorded since the version reached; how many there were."""
        folded = 0
        for envelope in self.store.events.read_stream(self.stream_id, self.version):
            folded += 1
            try:
                event = envelope.event()
            except EventCodecError:
                self.undecodable += 1
                self.summary.events = max(self.summary.events, envelope.stream_version)
                continue
            self.summary.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
            self._fold(event, envelope.recorded_at)
            if isinstance(event, EpisodeCompleted):
                continue  # the timeline has a line per evaluation, not per Episode
            text = event_text(event, self.summary)
            if text is not None:
                self.timeline_total += 1
                self.timeline.append(TimelineEvent(envelope.recorded_at, event.type_name(), text))
        return folded

    def _attempt(self, number: int) -> Attempt:
        found = self.attempts.get(number)
        if found is None:
            found = self.attempts[number] = Attempt(number)
        return found

    def _fold(self, event: Event, at: int) -> None:
        match event:
            case RunCreated():
                self.private = PrivateValues.of(event, self.store.blobs)
            case EpisodeCompleted():
                counts = self.episodes.get(event.submission_id)
                if counts is None:  # most events of a long Run are Episodes: no Counter each
                    counts = self.episodes[event.submission_id] = Counter()
                counts[event.status] += 1
            case AgentStarted() | AgentExited() | AgentMessages():
                self._agent(event, at)
            case SubmissionRejected():
                self.rejections.append(
                    Rejection(at, "submit", event.code, event.message, event.selector or "")
                )
            case FinishRejected():
                candidates = ", ".join(map(str, event.candidates))
                self.rejections.append(
                    Rejection(at, "finish", event.code, event.message, candidates)
                )
            case _:  # Validation and Assessment: their public outcomes
                fold_outcomes(self, event)

    def _agent(self, event: AgentStarted | AgentExited | AgentMessages, at: int) -> None:
        attempt = self._attempt(event.attempt)
        match event:
            case AgentStarted():
                attempt.started_at = at
                if event.tools:
                    attempt.tools = _tool_names(event.tools)
            case AgentExited():
                attempt.exited, attempt.exited_at = event, at
            case AgentMessages() if event.source is not None:
                # The CLI's own record of the whole attempt: it replaces any read before.
                attempt.recorded = _Counts()
                attempt.recorded.add(list(event.messages), errors=False)
                attempt.recorded_source = event.source
                if event.tools and not attempt.tools:
                    attempt.tools = _tool_names(event.tools)
            case AgentMessages():
                if attempt.live.messages == 0 and event.messages:
                    attempt.live_system_first = event.messages[0].role == "system"
                attempt.live.add(list(event.messages), errors=True)

    def lineage(self, wait_s: float = 0.0) -> tuple[dict[int, Lineage], bool]:
        """Each Submission's parent, edit kind and best so far (none where a program cannot
        be read), and whether a newer one is still being read: read again (in a thread of
        its own, waited for up to ``wait_s`` by the request that starts it) once a Submission
        has started, published or failed since; meanwhile the last one read stands."""
        s = self.summary
        key = (s.started, s.published, s.failed, int(s.initial_program_digest is not None))
        if not s.started or key == self._lineage_key:
            return (self._lineage if s.started else {}), False
        if self._pending is None:
            self._pending = (key, self._start_lineage())
        else:  # read for an earlier request: this one does not wait for it again
            wait_s = 0.0
        pending_key, future = self._pending
        try:
            found = future.result(timeout=wait_s)
        except TimeoutError:
            return self._lineage, True
        except Exception as exc:  # a store that changed under the viewer: shown without
            log.warning("cannot read the lineage of run %s: %s", s.run_id, exc)
            found = {}
        self._pending = None
        self._lineage, self._lineage_key = found, pending_key
        if pending_key != key:  # more Submissions came while it was read: read again
            return self.lineage(0.0)
        return found, False

    def _start_lineage(self) -> Future[dict[int, Lineage]]:
        future: Future[dict[int, Lineage]] = Future()
        run_id = self.summary.run_id

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(lineage_of(self.store, run_id))
            except BaseException as exc:  # handed to whoever waits for it
                future.set_exception(exc)

        threading.Thread(target=work, name=f"lineage-{run_id}", daemon=True).start()
        return future


class RunReaders:
    """The readers of the last ``size`` Runs opened over ``store``, each caught up on
    ``get``."""

    def __init__(self, store: Store, size: int = READERS) -> None:
        self.store = store
        self.size = size
        self._readers: OrderedDict[str, RunReader] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, stream_id: str) -> RunReader:
        """The reader of ``stream_id``, not yet caught up (do that under its lock)."""
        with self._lock:
            reader = self._readers.pop(stream_id, None)
            if reader is None:
                reader = RunReader(self.store, stream_id)
            self._readers[stream_id] = reader  # the most recently opened last
            while len(self._readers) > self.size:
                self._readers.popitem(last=False)
            return reader

    def __len__(self) -> int:
        return len(self._readers)
