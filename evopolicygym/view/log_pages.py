"""A Run's Agent conversation and its event log, each paged from the stream, never whole.

``/runs/{run}/conversation?attempt=N&page=K`` shows the Agent's messages of attempt N,
``PAGE_MESSAGES`` a page. The attempt is what the exporters take: its live chunks, unless
the CLI's own record of it (an ``AgentMessages`` with ``source``) came after them, which then
stands in for them behind the live stream's leading system prompt. An index kept per Run
(the version of each live chunk and the count of messages up to it, 16 bytes a chunk, with
each attempt's usage) is read on from where the last request left it, from a partial decode
of each chunk; a page then reads only the chunks that hold its messages (or the one source
record) and decodes only those whole.

``/runs/{run}/events?after=V`` shows ``PAGE_EVENTS`` events from stream version V on: each
payload as indented JSON without its Host-private values (see ``public_payload``).

``RunText`` is how every page of a Run shows recorded text: through the viewer's redactor,
then with the Run's Host-private values (``PrivateValues``) scrubbed, clipped.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from evopolicygym.records.events import (
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    CandidateAssessed,
    CandidateValidated,
    Envelope,
    EventCodecError,
    ReferenceValidated,
    RunCreated,
)
from evopolicygym.records.private import REDACTED, PrivateValues
from evopolicygym.records.runs import public, run_id_of
from evopolicygym.records.timeline import event_text
from evopolicygym.transcript import Message, Usage
from evopolicygym.view.app import Viewer, number_param, render, resolve_stream, viewer_of

__all__ = [
    "PAGE_EVENTS",
    "PAGE_MESSAGES",
    "ROUTES",
    "TEXT_LIMIT",
    "MessageView",
    "RunText",
    "public_payload",
    "run_text",
]

PAGE_MESSAGES = 50
PAGE_EVENTS = 100
TEXT_LIMIT = 20_000  # characters of one recorded text kept in a page (the record keeps all)
_PRIVATE_CACHE = 64  # Runs whose private values are kept between requests
_INDEX_CACHE = 8  # Runs whose conversation index is kept (16 bytes a transcript chunk)

T = TypeVar("T")


# --------------------------------------------------------------------------- shared by the pages


def first(items: Iterable[T]) -> T | None:
    """The first of ``items`` (a stream read), the reader closed after it."""
    iterator = iter(items)
    try:
        return next(iterator, None)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters in the record]"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass(frozen=True)
class RunText:
    """How a page shows a Run's recorded text: redacted, its private values scrubbed."""

    redact: Callable[[str], str]
    private: PrivateValues

    def text(self, value: str, limit: int | None = TEXT_LIMIT) -> str:
        return _clip(self.private.scrub(self.redact(value)), limit)

    def value(self, value: Any) -> Any:
        """``value`` (plain JSON values) with every string and key shown as ``text`` shows it,
        and every number that is a private one replaced."""
        if isinstance(value, str):
            return self.private.scrub(self.redact(value))
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            shown = str(value)
            return value if self.private.scrub(shown) == shown else REDACTED
        if isinstance(value, dict):
            return {str(self.value(str(k))): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return _finite(value)

    def pretty(self, value: Any, limit: int | None = TEXT_LIMIT) -> str:
        """``value`` as indented JSON text, shown as ``value`` shows it, clipped."""
        text = json.dumps(
            self.value(value), indent=2, sort_keys=True, ensure_ascii=False, default=str
        )
        return _clip(text, limit)


def _private_of(viewer: Viewer, stream_id: str, created: RunCreated | None) -> PrivateValues:
    """The Run's private values, kept between requests (its RunCreated never changes)."""
    cache: dict[str, PrivateValues] = viewer.extra.setdefault("pages.private_values", {})
    found = cache.get(stream_id)
    if found is not None:
        return found
    if created is None:
        envelope = first(viewer.store.events.read_stream(stream_id, 0))
        if envelope is None or envelope.type != RunCreated.type_name():
            return PrivateValues()  # nothing recorded yet (or a broken log): nothing to keep
        try:
            event = envelope.event()
        except EventCodecError:
            private = PrivateValues()
            private.unknown = True  # its values cannot be read: scrub every long number
            return private
        assert isinstance(event, RunCreated)
        created = event
    private = PrivateValues.of(created, viewer.store.blobs)
    if len(cache) >= _PRIVATE_CACHE:
        cache.pop(next(iter(cache)))
    cache[stream_id] = private
    return private


def run_text(viewer: Viewer, stream_id: str, created: RunCreated | None = None) -> RunText:
    """The ``RunText`` of a Run; ``created``: its ``RunCreated`` where the caller has read it."""
    return RunText(viewer.redact, _private_of(viewer, stream_id, created))


# Held-out results: their scores and Episode counts are public, the rest stays with the Host.
_HELD_OUT = frozenset(
    t.type_name()
    for t in (ReferenceValidated, CandidateValidated, AssessmentCompleted, CandidateAssessed)
)


def public_payload(type_name: str, data: dict[str, Any]) -> dict[str, Any]:
    """A raw payload without Host-private values: the pool, seeds and the config's seed
    (``records.runs.public``), and of Validation and Assessment results the Episodes'
    failure texts, the held-out Feedback content and a candidate's error text."""
    shown: dict[str, Any] = public(data)
    if type_name in _HELD_OUT:
        shown.pop("content", None)
        if type_name == CandidateAssessed.type_name():
            shown.pop("error", None)
        episodes = shown.get("episodes")
        if isinstance(episodes, list):
            shown["episodes"] = [
                {k: v for k, v in e.items() if k != "failure"} if isinstance(e, dict) else e
                for e in episodes
            ]
    return shown


# --------------------------------------------------------------------------- the conversation


class _Part(msgspec.Struct):
    """What the index reads of a message: the rest of it is skipped, not decoded."""

    role: str = ""
    usage: Usage | None = None
    tool_calls: list[msgspec.Raw] = []


class _Chunk(msgspec.Struct):
    attempt: int = 0
    source: str | None = None
    messages: list[_Part] = []
    tools: list[dict[str, Any]] | None = None


_CHUNK = msgspec.json.Decoder(_Chunk)


@dataclass
class _Tally:
    messages: int = 0
    calls: int = 0
    usage: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # in, out, cached, reasoning
    reported: bool = False  # whether any message reported usage

    def add(self, parts: list[_Part]) -> None:
        self.messages += len(parts)
        for part in parts:
            self.calls += len(part.tool_calls)
            if part.usage is not None:
                u = part.usage
                self.reported = True
                for i, n in enumerate(
                    (u.input_tokens, u.output_tokens, u.cached_tokens, u.reasoning_tokens)
                ):
                    self.usage[i] += n


@dataclass
class _Attempt:
    """Where an attempt's messages are: its live chunks (16 bytes each), its CLI record."""

    versions: array[int] = field(default_factory=lambda: array("q"))  # live chunks' versions
    ends: array[int] = field(default_factory=lambda: array("q"))  # live messages up to each
    live: _Tally = field(default_factory=_Tally)
    system: bool = False  # whether the live stream opens with a system message
    source: str | None = None
    source_version: int | None = None  # the last CLI record's (it stands)
    source_tally: _Tally | None = None
    tools: list[str] | None = None


@dataclass
class _Index:
    """A Run's attempts, caught up from the stream version it has read to."""

    version: int = 0
    attempts: dict[int, _Attempt] = field(default_factory=dict)  # in the order first seen
    lock: threading.Lock = field(default_factory=threading.Lock)


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    names = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        names.append(str(name) if name is not None else "?")
    return names


def _fold(index: _Index, envelope: Envelope) -> None:
    if envelope.type == AgentStarted.type_name():
        try:
            started = envelope.event()
        except EventCodecError:
            return
        assert isinstance(started, AgentStarted)
        entry = index.attempts.setdefault(started.attempt, _Attempt())
        if started.tools:
            entry.tools = _tool_names(started.tools)
        return
    if envelope.type != AgentMessages.type_name():
        return
    try:
        head = _CHUNK.decode(envelope.payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return  # `record verify` names it; the page shows what decodes
    entry = index.attempts.setdefault(head.attempt, _Attempt())
    if head.source is not None:  # the CLI's own record: the last one stands
        entry.source, entry.source_version = head.source, envelope.stream_version
        entry.source_tally = _Tally()
        entry.source_tally.add(head.messages)
        if head.tools:  # what the CLI's record says it offered: exact where it is told
            entry.tools = _tool_names(head.tools)
    elif head.messages:
        if not entry.versions:
            entry.system = head.messages[0].role == "system"
        entry.live.add(head.messages)
        entry.versions.append(envelope.stream_version)
        entry.ends.append(entry.live.messages)


def _caught_up(viewer: Viewer, stream_id: str) -> _Index:
    """The Run's index, read on from where the last request left it."""
    cache: dict[str, _Index] = viewer.extra.setdefault("pages.conversations", {})
    index = cache.get(stream_id)
    if index is None:
        if len(cache) >= _INDEX_CACHE:
            cache.pop(next(iter(cache)))
        index = cache.setdefault(stream_id, _Index())
    with index.lock:
        for envelope in viewer.store.events.read_stream(stream_id, index.version):
            _fold(index, envelope)
            index.version = envelope.stream_version
    return index


def _live_window(
    viewer: Viewer, stream_id: str, chunks: list[tuple[int, int]], start: int, end: int
) -> list[tuple[int, Message]]:
    """The live messages in [start, end) from ``chunks`` (version, first message's number),
    read in one pass from the first of them to the last."""
    wanted = dict(chunks)
    found: list[tuple[int, Message]] = []
    if not chunks:
        return found
    last = chunks[-1][0]
    reader = viewer.store.events.read_stream(stream_id, chunks[0][0] - 1)
    try:
        for envelope in reader:
            if envelope.stream_version > last:
                break
            begin = wanted.get(envelope.stream_version)
            if begin is None:
                continue
            try:
                event = envelope.event()
            except EventCodecError:
                continue
            assert isinstance(event, AgentMessages)
            for offset, message in enumerate(event.messages):
                if start <= begin + offset < end:
                    found.append((begin + offset, message))
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    return found


def _chunks(entry: _Attempt, start: int, end: int) -> list[tuple[int, int]]:
    """The live chunks holding messages in [start, end): (version, first message's number)."""
    out = []
    i = bisect.bisect_right(entry.ends, start)
    while i < len(entry.ends):
        begin = entry.ends[i - 1] if i > 0 else 0
        if begin >= end:
            break
        out.append((entry.versions[i], begin))
        i += 1
    return out


def _recorded(viewer: Viewer, stream_id: str, version: int) -> list[Message]:
    envelope = first(viewer.store.events.read_stream(stream_id, version - 1))
    event = envelope.event() if envelope is not None else None
    return event.messages if isinstance(event, AgentMessages) else []


@dataclass
class _Conversation:
    attempts: list[int]
    attempt: int | None
    entry: _Attempt | None
    total: int
    tally: _Tally
    messages: list[tuple[int, Message]]


def _read_conversation(
    viewer: Viewer, stream_id: str, attempt: int | None, page: int
) -> _Conversation:
    start, end = (page - 1) * PAGE_MESSAGES, page * PAGE_MESSAGES
    index = _caught_up(viewer, stream_id)
    with index.lock:  # a snapshot of what this page reads
        attempts = sorted(index.attempts)
        if attempt is None and index.attempts:
            attempt = next(iter(index.attempts))  # the first recorded
        entry = index.attempts.get(attempt) if attempt is not None else None
        if entry is None:
            return _Conversation(attempts, attempt, None, 0, _Tally(), [])
        source, tally = entry.source_version, entry.source_tally
        lead = 1 if entry.system and source is not None else 0
        if source is None or tally is None:
            chunks, total, tally = _chunks(entry, start, end), entry.live.messages, entry.live
        else:  # the CLI's record stands in for the chunks, behind the live system prompt
            chunks = _chunks(entry, 0, 1) if lead and start == 0 else []
            total = lead + tally.messages
        tally = replace(tally, usage=list(tally.usage))  # as it is now: the index grows on
    if source is None:
        return _Conversation(
            attempts,
            attempt,
            entry,
            total,
            tally,
            _live_window(viewer, stream_id, chunks, start, end),
        )
    messages = _live_window(viewer, stream_id, chunks, 0, 1)
    low, high = max(start - lead, 0), max(end - lead, 0)
    recorded = _recorded(viewer, stream_id, source)[low:high]
    messages += [(lead + low + k, m) for k, m in enumerate(recorded)]
    return _Conversation(attempts, attempt, entry, total, tally, messages)


@dataclass(frozen=True)
class MessageView:
    """One message as the page shows it: every recorded text redacted and scrubbed."""

    number: int  # 1-based, in the attempt
    role: str
    at: int
    model: str | None
    name: str | None
    tool_call_id: str | None
    fault: str | None
    content: str
    reasoning: str | None
    reasoning_chars: int
    tool_calls: list[tuple[str, str, str]]  # name, id, arguments as JSON text
    usage: Usage | None


def _message_view(number: int, m: Message, shown: RunText) -> MessageView:
    fault = None
    if m.error is not None:
        fault = m.error.kind + (f" {m.error.status}" if m.error.status is not None else "")
    return MessageView(
        number=number,
        role=m.role,
        at=m.at,
        model=shown.text(m.model, 200) if m.model else None,
        name=shown.text(m.name, 200) if m.name else None,
        tool_call_id=shown.text(m.tool_call_id, 200) if m.tool_call_id else None,
        fault=shown.text(fault, 200) if fault else None,
        content=shown.text(m.content),
        reasoning=shown.text(m.reasoning) if m.reasoning else None,
        reasoning_chars=len(m.reasoning or ""),
        tool_calls=[
            (shown.text(c.name, 200), shown.text(c.id, 200), shown.pretty(c.arguments))
            for c in m.tool_calls
        ],
        usage=m.usage,
    )


async def conversation(request: Request) -> Response:
    viewer = viewer_of(request)
    attempt = number_param(request, "attempt", None, 0)
    page = number_param(request, "page", 1, 1) or 1

    def read() -> dict[str, Any]:
        stream_id = resolve_stream(viewer, request.path_params["run"])
        found = _read_conversation(viewer, stream_id, attempt, page)
        if attempt is not None and found.entry is None:
            raise HTTPException(404, f"this Run has no Agent attempt {attempt}")
        shown = run_text(viewer, stream_id)
        entry = found.entry
        return {
            "run_id": run_id_of(stream_id) or stream_id,
            "attempts": found.attempts,
            "attempt": found.attempt,
            "source": entry.source if entry is not None else None,
            "tools": [shown.text(t, 200) for t in (entry.tools or [])] if entry else [],
            "total": found.total,
            "tally": found.tally,
            "messages": [_message_view(i + 1, m, shown) for i, m in found.messages],
            "page": page,
            "pages": max(1, math.ceil(found.total / PAGE_MESSAGES)),
            "per_page": PAGE_MESSAGES,
        }

    context = await run_in_threadpool(read)
    return render(request, "conversation.html", live_run=context["run_id"], **context)


# --------------------------------------------------------------------------- the event log


@dataclass(frozen=True)
class EventRow:
    version: int
    position: int
    type: str
    recorded_at: int
    summary: str
    payload: str


def _event_row(envelope: Envelope, shown: RunText) -> EventRow:
    try:
        text = event_text(envelope.event())
        summary = shown.text(text, 2_000) if text else ""
    except EventCodecError as exc:
        summary = shown.text(f"does not decode: {exc}", 2_000)
    try:
        payload = shown.pretty(public_payload(envelope.type, envelope.data()))
    except (msgspec.DecodeError, AttributeError):
        payload = "(the payload is not a JSON object: see record verify)"
    return EventRow(
        envelope.stream_version,
        envelope.position,
        envelope.type,
        envelope.recorded_at,
        summary,
        payload,
    )


async def events(request: Request) -> Response:
    viewer = viewer_of(request)
    after = number_param(request, "after", 0, 0) or 0

    def read() -> dict[str, Any]:
        stream_id = resolve_stream(viewer, request.path_params["run"])
        shown = run_text(viewer, stream_id)
        rows: list[EventRow] = []
        more = False
        reader = viewer.store.events.read_stream(stream_id, after)
        try:
            for envelope in reader:
                if len(rows) == PAGE_EVENTS:
                    more = True
                    break
                rows.append(_event_row(envelope, shown))
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()
        info = [s for s in viewer.store.events.streams(stream_id) if s.stream_id == stream_id]
        version = info[0].version if info else (rows[-1].version if rows else after)
        return {
            "run_id": run_id_of(stream_id) or stream_id,
            "rows": rows,
            "after": after,
            "more": more,
            "next_after": rows[-1].version if rows else after,
            "prev_after": max(0, after - PAGE_EVENTS) if after > 0 else None,
            "last_after": max(0, (version - 1) // PAGE_EVENTS * PAGE_EVENTS),
            "version": version,
            "per_page": PAGE_EVENTS,
        }

    context = await run_in_threadpool(read)
    return render(request, "events.html", live_run=context["run_id"], **context)


ROUTES = [
    Route("/runs/{run}/conversation", conversation, name="conversation"),
    Route("/runs/{run}/events", events, name="events"),
]
