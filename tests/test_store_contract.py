"""The EventStore contract, written once and run against every backend: support.backends.BACKENDS
(SQLite) and PostgreSQL (a database of its own per store, see support/pg.py).

Positions are gap-free in commit order, stream versions count from 1, appends are
atomic and checked against an expected version, a retried batch is a no-op that
returns the original positions, every envelope field survives the round trip and
the hash chain recomputes. SQLite-specific checks (triggers, files, processes) are
at the end.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from evopolicygym.records.chain import GENESIS, chain_hash
from evopolicygym.records.events import (
    EVENT_TYPES,
    AgentExited,
    AgentMessages,
    AgentStarted,
    ArtifactRef,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    CellRunAssigned,
    CellRunEnded,
    Envelope,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    ExperimentAgent,
    ExperimentBenchmark,
    ExperimentCell,
    ExperimentCreated,
    FinalSubmissionSelected,
    FinishAccepted,
    FinishRejected,
    NewEvent,
    PoolEntry,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
    new_event,
)
from evopolicygym.records.fold import iter_events
from evopolicygym.records.location import open_store
from evopolicygym.records.sqlite import SQLiteEventStore
from evopolicygym.records.store import (
    ANY_VERSION,
    FORMAT_VERSION,
    MAX_EVENT_BYTES,
    DuplicateEventError,
    EventStore,
    EventTooLarge,
    ExpectedVersionError,
    StoreError,
    StreamInfo,
)
from evopolicygym.records.tables import EventRecord, LogModel
from evopolicygym.records.verify import verify_store
from evopolicygym.transcript import AgentIdentity, Message, ToolCall, Usage
from tests.support.backends import (
    every_backend,  # noqa: F401 (the fixture open_backend)
)

ROOT = Path(__file__).resolve().parent.parent


def episode(event_id: str, n: int = 0, reward: float = 1.5) -> NewEvent:
    event = EpisodeCompleted(
        submission_id=n, index=n, status="ok", total_reward=reward, steps=10 + n
    )
    return new_event(event, event_id)


def batch(prefix: str, count: int) -> list[NewEvent]:
    return [episode(f"{prefix}-{i}", i) for i in range(count)]


def read_everything(store: EventStore, page: int = 1000) -> list[Envelope]:
    envelopes: list[Envelope] = []
    while chunk := store.read_all(envelopes[-1].position if envelopes else 0, page):
        envelopes.extend(chunk)
    return envelopes


def assert_chain(envelopes: list[Envelope]) -> None:
    """Positions 1..n, payload hashes, links and chain hashes, recomputed here independently."""
    prev = GENESIS
    for expected_position, e in enumerate(envelopes, start=1):
        assert e.position == expected_position
        assert e.payload_hash == hashlib.sha256(e.payload).hexdigest()
        assert e.prev_hash == prev
        assert e.hash == chain_hash(
            e.prev_hash,
            e.position,
            e.stream_id,
            e.stream_version,
            e.event_id,
            e.type,
            e.schema_version,
            e.recorded_at,
            e.payload_hash,
        )
        prev = e.hash


def assert_matches(envelope: Envelope, new: NewEvent, stream_id: str, version: int) -> None:
    assert envelope.stream_id == stream_id
    assert envelope.stream_version == version
    assert envelope.event_id == new.event_id
    assert envelope.type == new.type
    assert envelope.schema_version == new.schema_version
    assert envelope.payload == new.payload
    assert isinstance(envelope.payload, bytes)


# --------------------------------------------------------------------------- basics


def test_an_empty_store_has_nothing(event_store: EventStore) -> None:
    assert event_store.head() == 0
    assert event_store.read_all() == []
    assert event_store.streams() == []
    assert event_store.streams("run-") == []
    assert list(event_store.read_stream("nope")) == []
    assert verify_store(event_store).problems == []


def test_append_assigns_gap_free_positions_and_versions(event_store: EventStore) -> None:
    before = time.time_ns()
    first = batch("a", 3)
    assert event_store.append("a", first, 0) == [1, 2, 3]
    second = batch("b", 2)
    assert event_store.append("b", second, 0) == [4, 5]
    third = batch("a2", 2)
    assert event_store.append("a", third, 3) == [6, 7]
    after = time.time_ns()
    assert event_store.head() == 7

    stream_a = list(event_store.read_stream("a"))
    assert [e.position for e in stream_a] == [1, 2, 3, 6, 7]
    for version, (envelope, new) in enumerate(zip(stream_a, first + third, strict=True), 1):
        assert_matches(envelope, new, "a", version)
    stream_b = list(event_store.read_stream("b"))
    assert [e.position for e in stream_b] == [4, 5]
    for version, (envelope, new) in enumerate(zip(stream_b, second, strict=True), 1):
        assert_matches(envelope, new, "b", version)

    everything = event_store.read_all()
    assert [e.event_id for e in everything] == [n.event_id for n in first + second + third]
    assert everything[0].prev_hash == GENESIS
    assert all(before <= e.recorded_at <= after for e in everything)
    assert_chain(everything)
    # read_stream and read_all agree envelope for envelope.
    assert sorted(stream_a + stream_b, key=lambda e: e.position) == everything
    assert verify_store(event_store).problems == []


def test_a_stream_read_stops_at_its_limit(event_store: EventStore) -> None:
    """``limit`` bounds what is read, across pages too (a page is STREAM_PAGE events)."""
    from evopolicygym.records.store import STREAM_PAGE

    count = STREAM_PAGE + 5
    for start in range(0, count, 500):
        event_store.append("long", batch(f"l{start}", min(500, count - start)), start)
    event_store.append("other", batch("o", 3), 0)
    every = list(event_store.read_stream("long"))
    assert len(every) == count
    for start, limit in ((0, 1), (0, 0), (4, 3), (0, STREAM_PAGE + 2), (count - 2, 10), (7, None)):
        found = list(event_store.read_stream("long", start, limit=limit))
        expected = every[start:] if limit is None else every[start : start + limit]
        assert [e.stream_version for e in found] == [e.stream_version for e in expected]


def test_append_continues_the_chain_across_calls(event_store: EventStore) -> None:
    for i in range(5):
        assert event_store.append(f"s{i % 2}", [episode(f"e{i}", i)], ANY_VERSION) == [i + 1]
    assert_chain(event_store.read_all())


# --------------------------------------------------------------------------- expected version


@pytest.mark.parametrize("expected", [0, 1, 3, 5, 100])
def test_a_wrong_expected_version_is_refused(event_store: EventStore, expected: int) -> None:
    event_store.append("run-1", batch("a", 2), 0)
    event_store.append("other", batch("o", 1), 0)
    head = event_store.head()
    with pytest.raises(ExpectedVersionError) as caught:
        event_store.append("run-1", [episode("late")], expected)
    error = caught.value
    assert (error.stream_id, error.expected, error.actual) == ("run-1", expected, 2)
    assert isinstance(error, StoreError)
    message = str(error)
    assert "'run-1'" in message
    rest = message.replace("'run-1'", "")
    assert str(expected) in rest and "2" in rest
    assert event_store.head() == head
    assert [e.event_id for e in event_store.read_stream("run-1")] == ["a-0", "a-1"]


def test_a_new_stream_is_at_version_0(event_store: EventStore) -> None:
    with pytest.raises(ExpectedVersionError) as caught:
        event_store.append("fresh", [episode("x")], 1)
    assert (caught.value.expected, caught.value.actual) == (1, 0)
    assert event_store.head() == 0
    assert event_store.append("fresh", [episode("x")], 0) == [1]
    with pytest.raises(ExpectedVersionError):
        event_store.append("fresh", [episode("y")], 0)


def test_any_version_skips_the_check(event_store: EventStore) -> None:
    assert event_store.append("s", [episode("a")], ANY_VERSION) == [1]
    assert event_store.append("s", batch("b", 2), ANY_VERSION) == [2, 3]
    assert event_store.append("s", [episode("c")], 3) == [4]
    assert [e.stream_version for e in event_store.read_stream("s")] == [1, 2, 3, 4]


# --------------------------------------------------------------------------- idempotency


def test_a_retried_batch_returns_the_original_positions(event_store: EventStore) -> None:
    original = batch("r", 3)
    positions = event_store.append("s", original, 0)
    event_store.append("s", batch("later", 2), 3)
    event_store.append("t", batch("t", 1), 0)
    head = event_store.head()
    before = read_everything(event_store)
    for expected in (0, 3, ANY_VERSION, 99):  # stale, stale, any, nonsense: all no-ops
        assert event_store.append("s", original, expected) == positions
    # The same events rebuilt from scratch are the same content.
    assert event_store.append("s", batch("r", 3), 0) == positions
    assert event_store.head() == head
    assert read_everything(event_store) == before


def test_a_reused_id_with_different_content_is_a_duplicate(event_store: EventStore) -> None:
    event_store.append("s", [episode("id-1", 1, reward=1.0)], 0)
    head = event_store.head()
    conflicts: list[tuple[str, NewEvent]] = [
        ("s", episode("id-1", 1, reward=2.0)),  # other payload
        ("t", episode("id-1", 1, reward=1.0)),  # other stream
        ("s", new_event(RunResumed(attempt=1), "id-1")),  # other type
        ("s", NewEvent("id-1", "EpisodeCompleted", 2, episode("id-1", 1, 1.0).payload)),
    ]
    for stream, conflict in conflicts:
        with pytest.raises(DuplicateEventError):
            event_store.append(stream, [conflict], ANY_VERSION)
    assert event_store.head() == head
    assert event_store.streams() == [StreamInfo("s", 1)]


def test_a_batch_mixing_new_and_existing_ids_is_refused(event_store: EventStore) -> None:
    event_store.append("s", batch("m", 2), 0)
    head = event_store.head()
    mixed = [*batch("m", 2), episode("brand-new")]
    for expected in (2, ANY_VERSION):
        with pytest.raises(DuplicateEventError):
            event_store.append("s", mixed, expected)
    with pytest.raises(DuplicateEventError):
        event_store.append("s", [episode("brand-new"), batch("m", 1)[0]], ANY_VERSION)
    assert event_store.head() == head
    assert "brand-new" not in {e.event_id for e in read_everything(event_store)}


def test_the_same_id_twice_in_one_batch_is_a_value_error(event_store: EventStore) -> None:
    with pytest.raises(ValueError):
        event_store.append("s", [episode("twice"), episode("other"), episode("twice")], 0)
    assert event_store.head() == 0
    assert event_store.streams() == []


def sized(event_id: str, size: int) -> NewEvent:
    """An AgentMessages event whose payload is exactly ``size`` bytes."""
    base = new_event(
        AgentMessages(attempt=1, chunk=0, messages=[Message(role="user", content="")]), event_id
    )
    text = "x" * (size - len(base.payload))
    return new_event(
        AgentMessages(attempt=1, chunk=0, messages=[Message(role="user", content=text)]), event_id
    )


def test_an_event_over_the_size_limit_is_refused_whole(event_store: EventStore) -> None:
    """One event over MAX_EVENT_BYTES: the append is refused with one line naming its type
    and size, and nothing of it (nor of the events beside it) is in the log."""
    event_store.append("s", batch("before", 2), 0)
    at_limit = sized("at-limit", MAX_EVENT_BYTES)
    assert len(at_limit.payload) == MAX_EVENT_BYTES
    over = sized("over", MAX_EVENT_BYTES + 1)
    for events in ([over], [episode("fine"), over, episode("also-fine")]):
        with pytest.raises(EventTooLarge) as refused:
            event_store.append("s", events, 2)
        message = str(refused.value)
        assert "\n" not in message and message.startswith(
            f"AgentMessages event of {MAX_EVENT_BYTES + 1:,} bytes"
        )
        assert f"limit of {MAX_EVENT_BYTES:,} bytes (8 MiB); nothing was appended" in message
        assert (refused.value.event_type, refused.value.size) == (
            "AgentMessages",
            MAX_EVENT_BYTES + 1,
        )
        assert isinstance(refused.value, StoreError)
    assert event_store.head() == 2 and event_store.streams() == [StreamInfo("s", 2)]
    assert event_store.append("s", [at_limit], 2) == [3]  # at the limit is within it
    assert [e.event_id for e in read_everything(event_store)] == [
        "before-0",
        "before-1",
        "at-limit",
    ]


# --------------------------------------------------------------------------- reading


def test_read_stream_from_version(event_store: EventStore) -> None:
    events = batch("v", 6)
    event_store.append("s", events[:4], 0)
    event_store.append("noise", batch("n", 2), 0)
    event_store.append("s", events[4:], 4)
    for from_version in range(0, 9):
        got = list(event_store.read_stream("s", from_version))
        assert [e.event_id for e in got] == [e.event_id for e in events[from_version:]]
        assert [e.stream_version for e in got] == list(range(from_version + 1, 7))
    assert list(event_store.read_stream("missing", 0)) == []


def test_read_stream_past_one_page(event_store: EventStore) -> None:
    events = batch("big", 2_500)
    event_store.append("big", events, 0)
    for from_version in (0, 999, 1000, 1001, 2499, 2500):
        got = [e.stream_version for e in event_store.read_stream("big", from_version)]
        assert got == list(range(from_version + 1, 2_501))


def test_read_all_pages(event_store: EventStore) -> None:
    for i in range(5):
        event_store.append(f"s{i % 3}", batch(f"p{i}", 5), ANY_VERSION)
    everything = event_store.read_all(0, 100)
    assert [e.position for e in everything] == list(range(1, 26))
    for limit in (1, 7, 25, 26):
        assert read_everything(event_store, page=limit) == everything
    assert event_store.read_all(10, 3) == everything[10:13]
    assert event_store.read_all(24, 10) == everything[24:]
    assert event_store.read_all(25) == []
    assert event_store.read_all(1_000) == []


def test_read_all_default_limit_is_1000(event_store: EventStore) -> None:
    event_store.append("s", batch("d", 1_200), 0)
    assert [e.position for e in event_store.read_all()] == list(range(1, 1_001))
    assert [e.position for e in event_store.read_all(1_000)] == list(range(1_001, 1_201))


def test_row_readers_page_like_read_all(event_store: EventStore) -> None:
    """``read_all_rows`` is ``read_all`` as tuples in envelope field order; ``read_event_rows``
    is the six columns a fold decodes; both page by position like ``read_all``."""
    for i in range(5):
        event_store.append(f"s{i % 3}", batch(f"r{i}", 5), ANY_VERSION)
    event_store.append("other", [new_event(RunResumed(attempt=2), "resumed")], 0)
    for start in (0, 1, 10, 25, 26, 100):
        for limit in (1, 7, 26, 1000):
            envelopes = event_store.read_all(start, limit)
            assert event_store.read_all_rows(start, limit) == [e.as_row() for e in envelopes]
            assert event_store.read_event_rows(start, limit) == [
                (e.position, e.stream_id, e.stream_version, e.type, e.schema_version, e.payload)
                for e in envelopes
            ]
    rows = event_store.read_all_rows()
    assert [Envelope.from_row(row) for row in rows] == event_store.read_all()
    assert all(isinstance(row, tuple) and isinstance(row[7], bytes) for row in rows)
    assert [row[0] for row in event_store.read_event_rows()] == list(range(1, 27))


def test_row_readers_default_limits(event_store: EventStore) -> None:
    event_store.append("s", batch("d", 10_050), 0)
    assert len(event_store.read_all_rows()) == 1_000
    assert len(event_store.read_event_rows()) == 10_000
    assert event_store.read_event_rows(10_000)[0][0] == 10_001


def test_a_sound_store_has_no_integrity_problems(event_store: EventStore) -> None:
    assert event_store.integrity_problems() == []
    event_store.append("s", batch("i", 50), 0)
    assert event_store.integrity_problems() == []


def test_interleaved_streams_keep_versions_and_one_global_order(event_store: EventStore) -> None:
    order: list[tuple[str, int]] = []
    versions = {"x": 0, "y": 0, "z": 0}
    for i in range(30):
        stream = "xyzzy"[i % 5]
        size = 1 + i % 3
        positions = event_store.append(
            stream, batch(f"i{i}", size), versions[stream] if i % 2 else ANY_VERSION
        )
        assert positions == list(range(len(order) + 1, len(order) + size + 1))
        for _ in range(size):
            versions[stream] += 1
            order.append((stream, versions[stream]))
    everything = read_everything(event_store)
    assert [(e.stream_id, e.stream_version) for e in everything] == order
    for stream, version in versions.items():
        assert [e.stream_version for e in event_store.read_stream(stream)] == list(
            range(1, version + 1)
        )
    assert event_store.streams() == [StreamInfo(s, v) for s, v in sorted(versions.items())]
    assert_chain(everything)


STREAM_IDS = ["run-1", "run-10", "run-2", "run-1/agent", "run_1", "runx1", "ru", "zzz", "run-"]


def test_streams_filter_by_prefix(event_store: EventStore) -> None:
    for i, stream in enumerate(STREAM_IDS):
        event_store.append(stream, batch(stream, i + 1), 0)
    version = {s: i + 1 for i, s in enumerate(STREAM_IDS)}

    def ids(prefix: str) -> list[str]:
        found = event_store.streams(prefix)
        assert all(info.version == version[info.stream_id] for info in found)
        return sorted(info.stream_id for info in found)

    assert ids("") == sorted(STREAM_IDS)
    assert ids("run-1") == ["run-1", "run-1/agent", "run-10"]
    assert ids("run-10") == ["run-10"]
    assert ids("run-") == ["run-", "run-1", "run-1/agent", "run-10", "run-2"]
    assert ids("run_") == ["run_1"]  # not a LIKE pattern
    assert ids("run") == ["run-", "run-1", "run-1/agent", "run-10", "run-2", "run_1", "runx1"]
    assert ids("ru") == sorted(s for s in STREAM_IDS if s.startswith("ru"))
    assert ids("run-3") == []
    assert ids("zz") == ["zzz"]
    assert ids("zzzz") == []
    assert ids("~") == []
    assert event_store.streams("run-10") == [StreamInfo("run-10", 2)]


@pytest.mark.parametrize("last", ["\U0010ffff", "\ud7ff"])
def test_streams_prefix_ending_in_the_highest_characters(
    event_store: EventStore, last: str
) -> None:
    prefix = "run" + last
    for stream in (prefix, prefix + "b", prefix + last, "run", "runa"):
        event_store.append(stream, [episode(f"id-{stream}")], 0)
    found = sorted(info.stream_id for info in event_store.streams(prefix))
    assert found == sorted([prefix, prefix + "b", prefix + last])


# --------------------------------------------------------------------------- reopening


def test_reopen_sees_everything(open_backend: Any, tmp_path: Path) -> None:
    store = open_backend(tmp_path, create=True)
    store.append("a", batch("a", 3), 0)
    store.append("b", batch("b", 2), 0)
    before = read_everything(store)
    streams = store.streams()
    store.close()

    store = open_backend(tmp_path, create=False)
    try:
        assert store.head() == 5
        assert read_everything(store) == before
        assert store.streams() == streams
        assert store.append("a", batch("a", 3), 0) == [1, 2, 3]  # retries still recognised
        assert store.append("a", [episode("a-more")], 3) == [6]
        assert_chain(read_everything(store))
    finally:
        store.close()
    # Creating again over an existing store changes nothing.
    store = open_backend(tmp_path, create=True)
    try:
        assert store.head() == 6
        assert verify_store(store).problems == []
    finally:
        store.close()


def test_opening_a_missing_store_without_create_fails(open_backend: Any, tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        open_backend(tmp_path / "missing", create=False)
    with pytest.raises(StoreError, match="create"):
        open_store(tmp_path / "nothing-here", create=False)
    assert not (tmp_path / "nothing-here").exists()


# --------------------------------------------------------------------------- model-based


STREAMS = ("run-1", "run-10", "shared")


class StoreMachine(RuleBasedStateMachine):
    """The store against a dict model: stream -> [(event_id, payload)]."""

    opener: ClassVar[Any]

    def __init__(self) -> None:
        super().__init__()
        self.location = Path(tempfile.mkdtemp(prefix="store-machine-"))
        self.store: EventStore = self.opener(self.location, create=True)
        self.model: dict[str, list[tuple[str, bytes]]] = {s: [] for s in STREAMS}
        self.batches: list[tuple[str, list[NewEvent], list[int]]] = []
        self.counter = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.location, ignore_errors=True)

    def fresh(self, reward: float) -> NewEvent:
        self.counter += 1
        return episode(f"ev-{self.counter}", self.counter, reward)

    def total(self) -> int:
        return sum(len(events) for events in self.model.values())

    @rule(
        stream=st.sampled_from(STREAMS),
        size=st.integers(1, 4),
        mode=st.sampled_from(["right", "wrong", "any"]),
        skew=st.integers(1, 3),
        below=st.booleans(),
        reward=st.floats(-1e6, 1e6, allow_nan=False),
    )
    def append(
        self, stream: str, size: int, mode: str, skew: int, below: bool, reward: float
    ) -> None:
        current = len(self.model[stream])
        events = [self.fresh(reward) for _ in range(size)]
        head = self.store.head()
        if mode == "wrong":
            expected = current - min(skew, current) if below and current else current + skew
            with pytest.raises(ExpectedVersionError) as caught:
                self.store.append(stream, events, expected)
            assert (caught.value.stream_id, caught.value.expected, caught.value.actual) == (
                stream,
                expected,
                current,
            )
            assert self.store.head() == head
            return
        expected = current if mode == "right" else ANY_VERSION
        positions = self.store.append(stream, events, expected)
        assert positions == list(range(head + 1, head + size + 1))
        self.model[stream].extend((e.event_id, e.payload) for e in events)
        self.batches.append((stream, events, positions))

    @precondition(lambda self: self.batches)
    @rule(index=st.integers(0, 1_000), expected=st.sampled_from([0, 1, 7, ANY_VERSION]))
    def retry(self, index: int, expected: int) -> None:
        stream, events, positions = self.batches[index % len(self.batches)]
        head = self.store.head()
        assert self.store.append(stream, events, expected) == positions
        assert self.store.head() == head

    @precondition(lambda self: self.batches)
    @rule(index=st.integers(0, 1_000), how=st.sampled_from(["payload", "stream", "mixed"]))
    def reuse_an_id(self, index: int, how: str) -> None:
        stream, events, _ = self.batches[index % len(self.batches)]
        old = events[0]
        head = self.store.head()
        if how == "payload":
            changed = episode(old.event_id, -1, reward=float("inf"))
            attempt: tuple[str, list[NewEvent]] = (stream, [changed])
        elif how == "stream":
            attempt = (next(s for s in STREAMS if s != stream), [old])
        else:
            attempt = (stream, [*events, self.fresh(0.0)])
        with pytest.raises(DuplicateEventError):
            self.store.append(attempt[0], attempt[1], ANY_VERSION)
        assert self.store.head() == head

    @rule(stream=st.sampled_from(STREAMS), from_version=st.integers(0, 12))
    def read_stream_from(self, stream: str, from_version: int) -> None:
        got = list(self.store.read_stream(stream, from_version))
        assert [(e.event_id, e.payload) for e in got] == self.model[stream][from_version:]
        assert [e.stream_version for e in got] == list(
            range(from_version + 1, len(self.model[stream]) + 1)
        )

    @rule(from_position=st.integers(0, 40), limit=st.integers(1, 10))
    def read_a_page(self, from_position: int, limit: int) -> None:
        page = self.store.read_all(from_position, limit)
        end = min(self.total(), from_position + limit)
        assert [e.position for e in page] == list(range(from_position + 1, end + 1))

    @invariant()
    def the_log_matches_the_model(self) -> None:
        assert self.store.head() == self.total()
        everything = read_everything(self.store, page=16)
        assert [e.position for e in everything] == list(range(1, self.total() + 1))
        for stream, events in self.model.items():
            got = [(e.event_id, e.payload) for e in everything if e.stream_id == stream]
            assert got == events
            assert [(e.event_id, e.payload) for e in self.store.read_stream(stream)] == events
        assert self.store.streams() == [
            StreamInfo(s, len(events)) for s, events in sorted(self.model.items()) if events
        ]
        assert_chain(everything)
        assert verify_store(self.store).problems == []


def test_the_store_behaves_like_the_model(open_backend: Any) -> None:
    machine = type("Machine", (StoreMachine,), {"opener": staticmethod(open_backend)})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=30, stateful_step_count=30, deadline=None)
    )


# --------------------------------------------------------------------------- every event type


def one_of_each() -> list[Event]:
    agent = AgentIdentity(name="ref", provider="reference", model="m-1", options={"t": 0.2})
    outcome = EpisodeOutcome(index=3, status="ok", total_reward=199.5, steps=200)
    failed = EpisodeOutcome(index=4, status="error", total_reward=0.0, steps=1, failure="boom")
    message = Message(
        role="assistant",
        content="Trying a PD rule.",
        reasoning="pole angle dominates",
        tool_calls=[ToolCall(id="c1", name="evaluate", arguments={"indices": [0, 1]})],
        usage=Usage(input_tokens=120, output_tokens=40, cached_tokens=10),
        at=1_700_000_000_000,
    )
    digest = "sha256:" + "ab" * 32
    return [
        RunCreated(
            run_id="run-1",
            config={"budget": 100, "nested": {"a": [1, 2.5, None, True]}},
            benchmark_id="cartpole",
            benchmark_spec={"env": "CartPole-v1", "max_steps": 500},
            environment_digest=digest,
            initial_program_digest=digest,
            agent=agent,
            pool=[PoolEntry(index=0, split="train", seed=7, policy_seed=8, scenario={"x": 1})],
            seeds={"validation": 11, "assessment": 12},
            skill_program_digests=[digest],
        ),
        AgentStarted(
            attempt=1,
            command=["agent", "--run", "run-1"],
            pid=4242,
            tools=[{"type": "function", "function": {"name": "bash", "parameters": {}}}],
        ),
        AgentMessages(
            attempt=1,
            chunk=0,
            messages=[message, Message(role="tool", content="{}", tool_call_id="c1", name="e")],
            raw_blob=digest,
        ),
        SubmissionRejected(
            request_id="q1", code="syntax", message="bad indent", program_digest=digest
        ),
        EvaluationStarted(
            submission_id=1,
            program_digest=digest,
            parent_program_digest=None,
            indices=[0, 1, 2],
            budget_reserved=3,
            budget_used=3,
        ),
        EpisodeCompleted(
            submission_id=1,
            index=0,
            status="ok",
            total_reward=500.0,
            steps=500,
            duration_s=0.25,
            output_tail="done\n",
            trace_blob=digest,
        ),
        SubmissionPublished(
            submission_id=1,
            program_digest=digest,
            score=412.25,
            failures=0,
            content={"summary": "ok", "episodes": [1, 2]},
            artifacts=[
                ArtifactRef(
                    name="trace", media_type="text/plain", retention="bulk", blob=digest, size=9
                )
            ],
            budget_used=3,
            budget_left=97,
        ),
        EvaluationFailed(submission_id=2, error="runner died", budget_consumed=2),
        FinishRejected(request_id="f1", code="empty", message="no candidates", candidates=[]),
        FinishAccepted(request_id="f2", candidates=[1, 3]),
        AgentExited(attempt=1, exit_code=0, signal=None, reason="finished", stdout_blob=digest),
        ValidationStarted(
            candidates=[1, 3], split="validation", episodes=20, seed=99, handoff="agent"
        ),
        ReferenceValidated(program_digest=digest, score=250.0, failures=0, episodes=[outcome]),
        CandidateValidated(submission_id=1, score=300.5, failures=1, episodes=[outcome, failed]),
        ValidationFailed(error="validation crashed"),
        FinalSubmissionSelected(
            submission_id=1, program_digest=digest, score=300.5, reason="best validation"
        ),
        AssessmentStarted(submission_id=1, split="assessment", episodes=50, seed=123),
        AssessmentCompleted(
            submission_id=1, score=280.0, failures=0, episodes=[outcome], content={"k": "v"}
        ),
        AssessmentFailed(error="assessment crashed"),
        CandidateAssessed(
            submission_id=2, score=250.0, failures=1, episodes=[outcome], content={"k": "v"}
        ),
        ExperimentCreated(
            experiment_id="exp-1",
            spec_digest="cd" * 32,
            profile="quick",
            config={"budget": 100},
            agents=[ExperimentAgent(name="ref", provider="reference", options={"t": 0.2})],
            benchmarks=[ExperimentBenchmark(name="cp", id="cartpole", params={"max_steps": 200})],
            cells=[
                ExperimentCell(
                    cell_id="ref/cp/1", agent="ref", benchmark="cp", seed=1, agent_seed=2
                )
            ],
        ),
        CellRunAssigned(cell_id="ref/cp/1", run_id="run-1", attempt=1),
        CellRunEnded(
            cell_id="ref/cp/1",
            run_id="run-1",
            attempt=1,
            outcome="finished",
            retryable=False,
            error=None,
        ),
        RunInterrupted(reason="SIGTERM", last_position=17),
        RunResumed(attempt=2),
        RunFinished(
            reason="finished",
            final_submission_id=1,
            validation_score=300.5,
            assessment_score=280.0,
            handoff="agent",
            reference_score=250.0,
            improved=True,
        ),
    ]


def test_every_event_type_round_trips(event_store: EventStore) -> None:
    originals = one_of_each()
    assert sorted(type(e).type_name() for e in originals) == sorted(EVENT_TYPES)
    news = [new_event(event, f"type-{i}") for i, event in enumerate(originals)]
    event_store.append("run-1", news, 0)
    stored = list(event_store.read_stream("run-1"))
    assert [e.type for e in stored] == [type(e).type_name() for e in originals]
    assert [e.schema_version for e in stored] == [type(e).SCHEMA_VERSION for e in originals]
    assert [e.event() for e in stored] == originals
    assert [e.event() for e in read_everything(event_store)] == originals
    assert [event for *_, event in iter_events(event_store)] == originals
    assert all(type(s.event()) is type(o) for s, o in zip(stored, originals, strict=True))


# --------------------------------------------------------------------------- SQLite specifics


def sqlite_path(store: EventStore) -> Path:
    if not isinstance(store, SQLiteEventStore):
        pytest.skip("SQLite backend only")
    return store.path


# sqlite_master of a store as log format 1 made it (before the tables were SQLModel models).
FORMAT_1_SCHEMA = [
    (
        "table",
        "events",
        "CREATE TABLE events (\n\tposition INTEGER NOT NULL, \n\tstream_id VARCHAR NOT NULL, "
        "\n\tstream_version INTEGER NOT NULL, \n\tevent_id VARCHAR NOT NULL, "
        "\n\ttype VARCHAR NOT NULL, \n\tschema_version INTEGER NOT NULL, "
        "\n\trecorded_at BIGINT NOT NULL, \n\tpayload BLOB NOT NULL, "
        "\n\tpayload_hash VARCHAR(64) NOT NULL, \n\tprev_hash VARCHAR(64) NOT NULL, "
        "\n\thash VARCHAR(64) NOT NULL, \n\tPRIMARY KEY (position), "
        "\n\tCONSTRAINT stream_version_unique UNIQUE (stream_id, stream_version), "
        "\n\tUNIQUE (event_id)\n)",
    ),
    (
        "trigger",
        "events_no_delete",
        "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
        "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
    ),
    (
        "trigger",
        "events_no_update",
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
    ),
    # No index for the position: INTEGER PRIMARY KEY makes it the rowid.
    ("index", "sqlite_autoindex_events_1", None),  # (stream_id, stream_version)
    ("index", "sqlite_autoindex_events_2", None),  # event_id
    ("index", "sqlite_autoindex_store_meta_1", None),
    (
        "table",
        "store_meta",
        'CREATE TABLE store_meta (\n\t"key" VARCHAR NOT NULL, \n\tvalue VARCHAR NOT NULL, '
        '\n\tPRIMARY KEY ("key")\n)',
    ),
]


def sqlite_schema(path: Path) -> list[tuple[str, str, str | None]]:
    raw = sqlite3.connect(path)
    try:
        return raw.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        raw.close()


def test_the_events_table_is_the_envelope() -> None:
    """The hot paths read and write rows in envelope field order: the table's column order."""
    assert list(EventRecord.__table__.columns.keys()) == list(Envelope.__struct_fields__)
    assert sorted(LogModel.metadata.tables) == ["events", "store_meta"]


def test_sqlite_creates_log_format_1_from_the_models(tmp_path: Path) -> None:
    """The file a new store gets is the one format 1 always had: changing the models (a
    column, a type, a constraint) must come with a new FORMAT_VERSION and an upgrade."""
    assert FORMAT_VERSION == 1
    path = tmp_path / "events.db"
    SQLiteEventStore(path, create=True).close()
    assert sqlite_schema(path) == FORMAT_1_SCHEMA
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("SELECT * FROM store_meta").fetchall() == [("format_version", "1")]
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        raw.close()


def test_a_store_made_by_format_1_ddl_opens_and_verifies(tmp_path: Path) -> None:
    """A store whose file was made by the old code (its DDL as written then) is read, appended
    to and verified as it is, through ``open_store`` and its Store as well as the bare log."""
    root = tmp_path / "store"
    root.mkdir()
    path = root / "events.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    for _, _, sql in FORMAT_1_SCHEMA:
        if sql is not None:
            raw.execute(sql)
    raw.execute("INSERT INTO store_meta (key, value) VALUES ('format_version', '1')")
    raw.close()
    with SQLiteEventStore(path) as old:
        assert old.append("run-old", batch("old", 5), 0) == [1, 2, 3, 4, 5]
    assert sqlite_schema(path) == FORMAT_1_SCHEMA
    with open_store(root, create=True) as store:  # creating over it changes nothing
        assert store.events.append("run-old", batch("more", 3), 5) == [6, 7, 8]
        assert store.events.append("run-old", batch("old", 5), 0) == [1, 2, 3, 4, 5]
        assert_chain(read_everything(store.events))
        assert verify_store(store).problems == []
        assert verify_store(store.events).problems == []
        assert list(iter_events(store)) == list(iter_events(store.events))
        assert [position for position, *_ in iter_events(store)] == list(range(1, 9))
    assert sqlite_schema(path) == FORMAT_1_SCHEMA


def test_sqlite_refuses_another_log_format(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    SQLiteEventStore(path, create=True).close()
    for found, message in ((FORMAT_VERSION + 1, "reads up to"), (FORMAT_VERSION - 1, "upgrade")):
        raw = sqlite3.connect(path)
        raw.execute("INSERT OR REPLACE INTO store_meta VALUES ('format_version', ?)", (str(found),))
        raw.commit()
        raw.close()
        with pytest.raises(StoreError, match=message):
            SQLiteEventStore(path)


def test_sqlite_refuses_update_and_delete(event_store: EventStore) -> None:
    path = sqlite_path(event_store)
    event_store.append("s", batch("u", 3), 0)
    before = event_store.read_all()
    raw = sqlite3.connect(path, timeout=30)
    try:
        for statement in (
            "UPDATE events SET payload = x'00' WHERE position = 2",
            "UPDATE events SET type = 'Forged'",
            "DELETE FROM events WHERE position = 3",
            "DELETE FROM events",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                raw.execute(statement)
            raw.rollback()
    finally:
        raw.rollback()
        raw.close()
    assert event_store.read_all() == before
    assert event_store.append("s", [episode("after")], 3) == [4]


def test_sqlite_refuses_files_that_are_not_stores(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE t (x)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not an EvoPolicyGym event log"):
        SQLiteEventStore(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreError):
        SQLiteEventStore(empty)


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    garbage = tmp_path / "events.db"
    garbage.write_bytes(b"this is not an SQLite database, just text\n" * 200)
    with pytest.raises(StoreError):
        SQLiteEventStore(garbage)


def test_a_refused_foreign_file_is_left_as_it_was(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE t (x)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError):
        SQLiteEventStore(other)
    raw = sqlite3.connect(other)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        raw.close()


def test_sqlite_create_in_a_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        SQLiteEventStore(tmp_path / "no" / "such" / "events.db", create=True)


CREATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evopolicygym.records.events import RunResumed, new_event
    from evopolicygym.records.location import open_store
    root, name, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    with open_store(root, create=True) as store:
        store.events.append(name, [new_event(RunResumed(attempt=1), name)], 0)
    print("ok", flush=True)
    """
)


def test_two_processes_creating_one_store_both_succeed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    go = tmp_path / "go"
    names = [f"creator-{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CREATOR, str(root), name, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for name in names
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        go.touch()
        results = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "ok"
    with open_store(root) as store:
        assert store.events.head() == len(names)
        assert sorted(s.stream_id for s in store.events.streams()) == names
        assert verify_store(store.events).problems == []
