"""The read models: DuckDB tables over the log for ``evopolicy query`` and analytics.

They live in ``read-models.duckdb`` in the store directory, are derived only
from the log (delete the file and they are rebuilt) and are caught up by
``refresh``. Tables:

- ``events``: one row per event, flat scalar columns plus the raw JSON payload.
- ``runs``: one row per Run stream: who, what, status, budget, scores, and the labels
  (``handoff``, ``improved``, ``success``) as the Run read API defines them.
- ``submissions``: one row per evaluated Submission of a Run.
- ``episodes``: one row per completed Episode of a Submission.

Host-private facts (``RunCreated.pool``, ``.pool_blob`` and ``.seeds``, ``RunCreated.config``,
``ValidationStarted.seed``, ``AssessmentStarted.seed``, validation and
assessment Episode outcomes) are copied into no column of ``runs``,
``submissions`` or ``episodes``. Only ``events.payload`` carries them, verbatim
from the log; that is acceptable because the Agent never sees the read models
(it sees only its workspace projection), exactly as it never sees the log.

A value the log allows but a column cannot hold (an integer beyond the column's
range, such as ``steps=2**63``) is stored as NULL; an event whose key cannot be
stored (a ``submission_id`` beyond INTEGER) is left out of ``submissions`` and
counted in its checkpoint's ``skipped``. The ``events`` row keeps the payload as it is
in the log, unless it is over ``PAYLOAD_BYTES`` (only logs written before the store's
event size limit hold one: a 100 MB RunCreated with its pool inline): then it keeps the
payload's top-level fields that fit in ``TRIMMED_BYTES``, smallest first, and
``_trimmed`` says how large the payload was and which fields it left out. One such event
costs a catch-up nothing more than a small one, and never stops it.

DuckDB admits one read-write process per database file, or any number of
read-only ones: ``open_read_models`` retries briefly while another process
holds it, then raises ``ReadModelsBusy``. ``refresh`` caps DuckDB's memory at
``MEMORY_LIMIT``; pages of the log are bounded in bytes (``PAGE_BYTES``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from evopolicygym.records.events import (
    AssessmentCompleted,
    CandidateAssessed,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationStarted,
)
from evopolicygym.records.location import Store
from evopolicygym.records.projections import (
    DEFAULT_BATCH,
    PAGE_BYTES,
    Batch,
    Connection,
    Projection,
    catch_up,
    insert_arrow,
    registered,
)
from evopolicygym.records.runs import RUN_PREFIX, RunSummary, SubmissionSummary, run_stream_id
from evopolicygym.records.store import MAX_EVENT_BYTES, StoreError
from evopolicygym.transcript import AgentIdentity

__all__ = [
    "EPISODES",
    "EVENTS",
    "LOCK_WAIT_S",
    "MEMORY_LIMIT",
    "PAYLOAD_BYTES",
    "PROJECTIONS",
    "RUNS",
    "SUBMISSIONS",
    "ReadModelsBusy",
    "lock_down",
    "open_read_models",
    "refresh",
]

LOCK_WAIT_S = 5.0
CHECKPOINT_THRESHOLD = "256MB"
MEMORY_LIMIT = "1GB"  # DuckDB's memory while catching up (it spills to disk past it)
_REMEMBER = 200_000  # rows of runs/submissions kept in memory during one catch-up
PAYLOAD_BYTES = MAX_EVENT_BYTES  # an ``events`` payload kept whole, at most (see the docstring)
TRIMMED_BYTES = 64 * 1024  # of an oversized payload's fields kept in its ``events`` row


class ReadModelsBusy(StoreError):
    """Another process holds the read-model database."""


# --------------------------------------------------------------------------- table shapes

_ARROW: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "TIMESTAMP": pa.timestamp("us"),  # values are microseconds since the epoch
    "INTEGER[]": pa.list_(pa.int32()),
    "BOOLEAN": pa.bool_(),
}

# The integer columns' ranges: a value outside them is stored as NULL.
_RANGES: dict[str, tuple[int, int]] = {
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "INTEGER[]": (-(2**31), 2**31 - 1),
}


def _fits(value: Any, kind: str) -> bool:
    low, high = _RANGES[kind]
    return value is None or low <= value <= high


def _fits_column(value: Any, kind: str) -> bool:
    """Whether a column of ``kind`` holds ``value`` as it is (a list: every item)."""
    if kind == "INTEGER[]":
        return value is None or all(_fits(v, kind) for v in value)
    return _fits(value, kind)


def _stored(value: Any, kind: str) -> Any:
    """``value`` as a column of ``kind`` can hold it: out-of-range integers become None."""
    if _fits_column(value, kind):
        return value
    if kind == "INTEGER[]":
        return [v if _fits(v, kind) else None for v in value]
    return None


def _column(values: list[Any], kind: str) -> list[Any]:
    """A column of ``kind`` as it can be stored (see ``_stored``)."""
    low, high = _RANGES[kind]
    if all(v is None or low <= v <= high for v in values):
        return values
    return [_stored(v, kind) for v in values]


@dataclass(frozen=True)
class _Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type)
    key: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def create(self, connection: Connection) -> None:
        columns = [f"{name} {kind}" for name, kind in self.columns]
        if self.key:
            columns.append(f"PRIMARY KEY ({', '.join(self.key)})")
        connection.execute(f"CREATE TABLE IF NOT EXISTS {self.name} ({', '.join(columns)})")

    def schema(self) -> pa.Schema:
        return pa.schema([(name, _ARROW[kind]) for name, kind in self.columns])

    def ranged(self) -> Iterator[tuple[str, str]]:
        """The columns whose values may be out of their range: the integer ones."""
        return ((name, kind) for name, kind in self.columns if kind in _RANGES)

    def load(
        self, connection: Connection, batch: Batch, keys: list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The current rows with these keys, timestamps as microseconds.

        Rows written earlier in the same catch-up come from ``batch.scratch``; after
        a fresh start those are all the rows there are, so nothing is read back."""
        known: dict[tuple[Any, ...], dict[str, Any]] = batch.scratch.setdefault("rows", {})
        found = {key: known[key] for key in keys if key in known}
        missing = [key for key in keys if key not in found]
        if missing and not (batch.fresh and batch.scratch.get("complete", True)):
            found.update(self._read(connection, missing))
        return found

    def _read(
        self, connection: Connection, keys: list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], dict[str, Any]]:
        data = self._keys(keys)
        view = f"__epg_{self.name}_keys"
        select = ", ".join(
            f"epoch_us(t.{name})" if kind == "TIMESTAMP" else f"t.{name}"
            for name, kind in self.columns
        )
        on = " AND ".join(f"t.{k} = k.{k}" for k in self.key)
        with registered(connection, view, data):
            rows = connection.execute(
                f"SELECT {select} FROM {self.name} t JOIN {view} k ON {on}"
            ).fetchall()
        names = self.names
        found = {}
        for row in rows:
            values = dict(zip(names, row, strict=True))
            found[tuple(values[k] for k in self.key)] = values
        return found

    def write(
        self,
        connection: Connection,
        batch: Batch,
        rows: dict[tuple[Any, ...], dict[str, Any]],
        existing: Iterable[tuple[Any, ...]],
    ) -> None:
        """Store ``rows`` (all of them new or changed), replacing the ``existing`` keys."""
        old = list(existing)
        if old:
            self._delete(connection, old)
        ranged = list(self.ranged())
        for row in rows.values():  # in place: the remembered row is the stored one
            for name, kind in ranged:
                row[name] = _stored(row[name], kind)
        data = pa.Table.from_pylist(list(rows.values()), schema=self.schema())
        insert_arrow(connection, self.name, data)
        known: dict[tuple[Any, ...], dict[str, Any]] = batch.scratch.setdefault("rows", {})
        known.update(rows)
        if len(known) > _REMEMBER:  # bounded memory: forget, and read back from now on
            known.clear()
            batch.scratch["complete"] = False

    def _keys(self, keys: list[tuple[Any, ...]]) -> pa.Table:
        kinds = dict(self.columns)
        return pa.table(
            {
                k: pa.array([key[j] for key in keys], _ARROW[kinds[k]])
                for j, k in enumerate(self.key)
            }
        )

    def _delete(self, connection: Connection, keys: list[tuple[Any, ...]]) -> None:
        view = f"__epg_{self.name}_keys"
        on = " AND ".join(f"{self.name}.{k} = k.{k}" for k in self.key)
        with registered(connection, view, self._keys(keys)):
            connection.execute(f"DELETE FROM {self.name} USING {view} k WHERE {on}")


def _us(ns: int) -> int:
    return ns // 1000


def _text(payloads: Sequence[bytes]) -> list[str]:
    """Payload bytes as text; invalid UTF-8 (a corrupt event) is replaced, not fatal; one
    over ``PAYLOAD_BYTES`` is trimmed first (``_trimmed``)."""
    limit = PAYLOAD_BYTES
    if any(len(payload) > limit for payload in payloads):
        payloads = [_trimmed(payload) if len(payload) > limit else payload for payload in payloads]
    try:
        return [payload.decode() for payload in payloads]
    except UnicodeDecodeError:
        return [payload.decode("utf-8", "replace") for payload in payloads]


_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_SORTED = msgspec.json.Encoder(order="sorted")


def _trimmed(payload: bytes) -> bytes:
    """An oversized payload as its ``events`` row keeps it: the top-level fields that fit
    in ``TRIMMED_BYTES``, smallest first (each as it is in the log), and ``_trimmed`` with
    the payload's size and the names of the fields left out."""
    try:
        fields = _FIELDS.decode(payload)  # each value's bytes, none of them decoded
    except (msgspec.DecodeError, msgspec.ValidationError):
        fields = {}  # not a JSON object: nothing of it is kept
    kept: dict[str, msgspec.Raw] = {}
    left_out: list[str] = []
    size = 0
    for key, raw in sorted(fields.items(), key=lambda item: len(item[1])):
        size += len(key) + len(raw) + 4
        if size <= TRIMMED_BYTES and key != "_trimmed":
            kept[key] = raw
        else:
            left_out.append(key)
    note = {"bytes": len(payload), "left_out": sorted(left_out)}
    return _SORTED.encode({**kept, "_trimmed": note})


# --------------------------------------------------------------------------- events

EVENTS_TABLE = _Table(
    "events",
    (
        ("position", "BIGINT"),
        ("stream_id", "VARCHAR"),
        ("stream_version", "BIGINT"),
        ("event_id", "VARCHAR"),
        ("type", "VARCHAR"),
        ("schema_version", "INTEGER"),
        ("recorded_at", "TIMESTAMP"),
        ("run_id", "VARCHAR"),
        # The raw payload, Host-private fields included (see the module docstring).
        ("payload", "JSON"),
    ),
)


def _apply_events(connection: Connection, batch: Batch) -> None:
    data = pa.table(
        {
            "position": pa.array(batch.positions, pa.int64()),
            "stream_id": pa.array(batch.stream_ids, pa.string()),
            "stream_version": pa.array(batch.stream_versions, pa.int64()),
            "event_id": pa.array(batch.event_ids, pa.string()),
            "type": pa.array(batch.types, pa.string()),
            "schema_version": pa.array(_column(list(batch.schema_versions), "INTEGER"), pa.int32()),
            "recorded_at": pa.array(batch.recorded_at, pa.int64()),
            "payload": pa.array(_text(batch.payloads), pa.string()),
        }
    )
    insert_arrow(
        connection,
        "events",
        data,
        "position, stream_id, stream_version, event_id, type, schema_version, "
        "make_timestamp(recorded_at // 1000), "
        f"CASE WHEN starts_with(stream_id, '{RUN_PREFIX}') "
        f"THEN substr(stream_id, {len(RUN_PREFIX) + 1}) END, "
        # A payload that is not JSON (a corrupt event) is kept as a JSON string.
        "CASE WHEN json_valid(payload) THEN payload::JSON ELSE to_json(payload) END",
    )


EVENTS = Projection(
    name="events",
    version=1,
    tables=("events",),
    create=EVENTS_TABLE.create,
    apply=_apply_events,
)


# --------------------------------------------------------------------------- runs

RUNS_TABLE = _Table(
    "runs",
    (
        ("run_id", "VARCHAR"),
        ("benchmark_id", "VARCHAR"),
        ("score_direction", "VARCHAR"),
        ("agent_name", "VARCHAR"),
        ("agent_provider", "VARCHAR"),
        ("agent_model", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        ("status", "VARCHAR"),  # running, interrupted, or the RunFinished reason
        ("submissions", "INTEGER"),  # evaluations started
        ("published", "INTEGER"),
        ("failed", "INTEGER"),
        ("rejected", "INTEGER"),  # submit requests refused before evaluation
        ("budget_used", "BIGINT"),
        ("best_score", "DOUBLE"),  # best published score in the Benchmark's direction
        ("best_basis", "VARCHAR"),  # single, matched (all on the same indices) or unmatched
        ("published_indices", "INTEGER[]"),  # the indices every Submission ran on, if the same
        ("best_submission_id", "INTEGER"),
        ("final_submission_id", "INTEGER"),
        ("validation_score", "DOUBLE"),
        ("assessment_score", "DOUBLE"),
        ("handoff", "VARCHAR"),  # agent, host or none: who named the candidates
        ("reference_score", "DOUBLE"),  # the initial Program's Validation score
        ("improved", "BOOLEAN"),  # the final Program beat it there
        ("success", "BOOLEAN"),  # finished, handed off by the Agent, and improved
        ("finished_at", "TIMESTAMP"),
        ("updated_at", "TIMESTAMP"),
    ),
    key=("run_id",),
)
_RUN_TYPES = frozenset(
    cls.type_name()
    for cls in (
        RunCreated,
        FinishAccepted,
        ValidationStarted,
        ReferenceValidated,
        EvaluationStarted,
        SubmissionPublished,
        EvaluationFailed,
        SubmissionRejected,
        FinalSubmissionSelected,
        AssessmentCompleted,
        RunInterrupted,
        RunResumed,
        RunFinished,
    )
)


def _run_summary(row: dict[str, Any]) -> RunSummary:
    """The summary a ``runs`` row holds (times in microseconds), to fold later events into."""

    def ns(us: int | None) -> int | None:
        return None if us is None else us * 1000

    status = row["status"]
    finished = status not in ("running", "interrupted")
    agent = None
    if row["agent_name"] is not None:
        agent = AgentIdentity(
            name=row["agent_name"], provider=row["agent_provider"] or "", model=row["agent_model"]
        )
    return RunSummary(
        run_id=row["run_id"],
        stream_id=run_stream_id(row["run_id"]),
        created_at=ns(row["created_at"]),
        updated_at=ns(row["updated_at"]),
        benchmark_id=row["benchmark_id"],
        score_direction=row["score_direction"] or "maximize",
        agent=agent,
        started=row["submissions"] or 0,
        published=row["published"] or 0,
        failed=row["failed"] or 0,
        rejected_submissions=row["rejected"] or 0,
        budget_used=row["budget_used"] or 0,
        best_score=row["best_score"],
        best_basis=row["best_basis"],
        published_indices=row["published_indices"],
        best_submission_id=row["best_submission_id"],
        final_submission_id=row["final_submission_id"],
        final_score=row["validation_score"],
        assessment_score=row["assessment_score"],
        finished_at=ns(row["finished_at"]),
        terminal_reason=status if finished else None,
        interrupted=status == "interrupted",
        reference_score=row["reference_score"],
        # What tells the handoff and improvement apart later: the recorded end, or (before
        # it) whether a finish was accepted or the Host nominated.
        terminal_handoff=row["handoff"] if finished else None,
        terminal_improved=row["improved"] if finished else None,
        finish_candidates=[] if not finished and row["handoff"] == "agent" else None,
        candidates_by="host" if not finished and row["handoff"] == "host" else None,
    )


def _run_row(summary: RunSummary) -> dict[str, Any]:
    """The ``runs`` row of a summary: public facts only, never the pool, seeds or config."""

    def us(ns: int | None) -> int | None:
        return None if ns is None else ns // 1000

    agent = summary.agent
    return {
        "run_id": summary.run_id,
        "benchmark_id": summary.benchmark_id,
        "score_direction": summary.score_direction,
        "agent_name": agent.name if agent is not None else None,
        "agent_provider": agent.provider if agent is not None else None,
        "agent_model": agent.model if agent is not None else None,
        "created_at": us(summary.created_at),
        "status": summary.terminal_reason or ("interrupted" if summary.interrupted else "running"),
        "submissions": summary.started,
        "published": summary.published,
        "failed": summary.failed,
        "rejected": summary.rejected_submissions,
        "budget_used": summary.budget_used,
        "best_score": summary.best_score,
        "best_basis": summary.best_basis,
        "published_indices": summary.published_indices,
        "best_submission_id": summary.best_submission_id,
        "final_submission_id": summary.final_submission_id,
        "validation_score": summary.final_score,
        "assessment_score": summary.assessment_score,
        "handoff": summary.handoff,
        "reference_score": summary.reference_score,
        "improved": summary.improved,
        "success": summary.success,
        "finished_at": us(summary.finished_at),
        "updated_at": us(summary.updated_at),
    }


def _apply_runs(connection: Connection, batch: Batch) -> None:
    """Fold the batch's Run events into their Runs' summaries (``RunSummary.apply``, the
    fold every reader of a Run uses) and store each touched Run's row."""
    todo = [
        (run_id, i, event)
        for i, event in batch.events(_RUN_TYPES)
        if (run_id := batch.run_ids[i]) is not None
    ]
    if not todo:
        return
    keys = list(dict.fromkeys((run_id,) for run_id, _, _ in todo))
    existing = RUNS_TABLE.load(connection, batch, keys)
    summaries = {key[0]: _run_summary(row) for key, row in existing.items()}
    for run_id, i, event in todo:
        summary = summaries.get(run_id)
        if summary is None:
            summary = summaries[run_id] = RunSummary(run_id=run_id, stream_id=run_stream_id(run_id))
        summary.apply(event, at=batch.recorded_at[i])
    rows = {(run_id,): _run_row(summary) for run_id, summary in summaries.items()}
    RUNS_TABLE.write(connection, batch, rows, existing)


RUNS = Projection(
    name="runs",
    version=3,
    tables=("runs",),
    create=RUNS_TABLE.create,
    apply=_apply_runs,
    types=_RUN_TYPES,
)


# --------------------------------------------------------------------------- submissions

SUBMISSIONS_TABLE = _Table(
    "submissions",
    (
        ("run_id", "VARCHAR"),
        ("submission_id", "INTEGER"),
        ("program_digest", "VARCHAR"),
        ("parent_program_digest", "VARCHAR"),
        ("parent_submission_id", "INTEGER"),  # the parent the Agent named (0: the initial program)
        ("indices", "INTEGER[]"),  # pool indices: the Agent's own choice, not Host-private
        ("budget_reserved", "INTEGER"),
        ("started_at", "TIMESTAMP"),
        ("status", "VARCHAR"),  # evaluating, published or failed
        ("score", "DOUBLE"),
        ("failures", "INTEGER"),
        ("published_at", "TIMESTAMP"),
        ("error", "VARCHAR"),
        ("budget_consumed", "INTEGER"),
        ("validation_score", "DOUBLE"),
        ("validation_failures", "INTEGER"),
        ("assessment_score", "DOUBLE"),  # the selected one's, or any assessed candidate's
        ("assessment_failures", "INTEGER"),
        ("assessment_failed", "BOOLEAN"),
        ("updated_at", "TIMESTAMP"),
    ),
    key=("run_id", "submission_id"),
)
# The columns a SubmissionSummary holds (all but the key), and which of them are times.
_SUBMISSION_FIELDS = tuple(
    n for n in SUBMISSIONS_TABLE.names if n not in ("run_id", "submission_id")
)
_SUBMISSION_TIMES = frozenset(n for n, kind in SUBMISSIONS_TABLE.columns if kind == "TIMESTAMP")
_SUBMISSION_TYPES = frozenset(
    cls.type_name()
    for cls in (
        EvaluationStarted,
        SubmissionPublished,
        EvaluationFailed,
        CandidateValidated,
        AssessmentCompleted,
        CandidateAssessed,
    )
)


def _submission_summary(row: dict[str, Any]) -> SubmissionSummary:
    """The summary a ``submissions`` row holds (times in microseconds)."""
    summary = SubmissionSummary(row["submission_id"])
    for name in _SUBMISSION_FIELDS:
        value = row[name]
        setattr(
            summary,
            name,
            value * 1000 if name in _SUBMISSION_TIMES and value is not None else value,
        )
    return summary


def _submission_row(run_id: str, summary: SubmissionSummary) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run_id, "submission_id": summary.submission_id}
    for name in _SUBMISSION_FIELDS:
        value = getattr(summary, name)
        row[name] = value // 1000 if name in _SUBMISSION_TIMES and value is not None else value
    return row


def _apply_submissions(connection: Connection, batch: Batch) -> None:
    """Fold the batch's Submission events with ``SubmissionSummary.apply`` (the fold every
    reader of a Submission uses) and store each touched Submission's row."""
    todo: list[tuple[tuple[str, int], int, Event]] = []
    for i, event in batch.events(_SUBMISSION_TYPES):
        if (run_id := batch.run_ids[i]) is None:
            continue
        if not _fits(event.submission_id, "INTEGER"):  # type: ignore[attr-defined]
            batch.skip(i, f"submission_id {event.submission_id} is out of range")  # type: ignore[attr-defined]
            continue
        todo.append(((run_id, event.submission_id), i, event))  # type: ignore[attr-defined]
    if not todo:
        return
    keys = list(dict.fromkeys(key for key, _, _ in todo))
    existing = SUBMISSIONS_TABLE.load(connection, batch, keys)
    summaries = {key: _submission_summary(row) for key, row in existing.items()}
    for key, i, event in todo:
        summary = summaries.get(key)
        if summary is None:
            summary = summaries[key] = SubmissionSummary(key[1])
        summary.apply(event, batch.recorded_at[i])
    rows = {key: _submission_row(key[0], summary) for key, summary in summaries.items()}
    SUBMISSIONS_TABLE.write(connection, batch, rows, existing)


SUBMISSIONS = Projection(
    name="submissions",
    version=3,
    tables=("submissions",),
    create=SUBMISSIONS_TABLE.create,
    apply=_apply_submissions,
    types=_SUBMISSION_TYPES,
)


# --------------------------------------------------------------------------- episodes

EPISODES_TABLE = _Table(
    "episodes",
    (
        ("position", "BIGINT"),
        ("run_id", "VARCHAR"),
        ("submission_id", "INTEGER"),
        ("pool_index", "INTEGER"),  # the index the Agent chose; the EpisodeSpec stays private
        ("status", "VARCHAR"),
        ("total_reward", "DOUBLE"),
        ("steps", "BIGINT"),
        ("failure", "VARCHAR"),
        ("duration_s", "DOUBLE"),
        ("trace_blob", "VARCHAR"),
        ("recorded_at", "TIMESTAMP"),
    ),
)
_EPISODE_TYPES = frozenset({EpisodeCompleted.type_name()})


def _apply_episodes(connection: Connection, batch: Batch) -> None:
    run_ids = batch.run_ids
    found = [(i, e) for i, e in batch.events(_EPISODE_TYPES) if run_ids[i] is not None]
    if not found:
        return
    rows = [i for i, _ in found]
    events: list[EpisodeCompleted] = [e for _, e in found]  # type: ignore[misc]
    positions, recorded = batch.positions, batch.recorded_at
    data = {
        "position": [positions[i] for i in rows],
        "run_id": [run_ids[i] for i in rows],
        "submission_id": _column([e.submission_id for e in events], "INTEGER"),
        "pool_index": _column([e.index for e in events], "INTEGER"),
        "status": [e.status for e in events],
        "total_reward": [e.total_reward for e in events],
        "steps": _column([e.steps for e in events], "BIGINT"),
        "failure": [e.failure for e in events],
        "duration_s": [e.duration_s for e in events],
        "trace_blob": [e.trace_blob for e in events],
        "recorded_at": [recorded[i] // 1000 for i in rows],
    }
    insert_arrow(connection, "episodes", pa.table(data, schema=EPISODES_TABLE.schema()))


EPISODES = Projection(
    name="episodes",
    version=1,
    tables=("episodes",),
    create=EPISODES_TABLE.create,
    apply=_apply_episodes,
    types=_EPISODE_TYPES,
)

PROJECTIONS: tuple[Projection, ...] = (EVENTS, RUNS, SUBMISSIONS, EPISODES)


# --------------------------------------------------------------------------- the database


def _locked(exc: BaseException) -> bool:
    message = str(exc).lower()
    return "lock" in message or "different configuration" in message


def _only_read(path: Any) -> bool:
    """Whether the processes holding the database only read it (a read-only open works)."""
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error:
        return False
    return True


def open_read_models(
    store: Store, read_only: bool = False, *, wait_s: float | None = None
) -> Connection:
    """A DuckDB connection to the store's read models, waiting up to ``wait_s`` for a lock
    (default ``LOCK_WAIT_S``) while another process holds the database."""
    path = store.read_models_path
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    if read_only and not path.exists():
        raise StoreError(f"no read models at {path} yet: refresh them first")
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _locked(exc):
                raise StoreError(
                    f"cannot open the read models at {path} ({' '.join(str(exc).split())}); "
                    "they are derived from the log: delete the file to rebuild them"
                ) from exc
            if time.monotonic() >= deadline:
                doing = "read" if not read_only and _only_read(path) else "updated"
                raise ReadModelsBusy(
                    f"read models are being {doing} by another process; try again"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


# What a connection that runs a user's SQL may not do: touch a file (COPY … TO, read_csv,
# ATTACH, EXPORT: the log is a file beside the read models), load or fetch an extension,
# or change these settings back. DuckDB can only turn them off while it runs, never on.
_LOCKED_DOWN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)


def lock_down(connection: Connection) -> Connection:
    """``connection`` with no access beyond its own database and settings that stay so:
    for SQL the store's owner did not write (``evopolicy query``)."""
    for setting in _LOCKED_DOWN:
        connection.execute(setting)
    return connection


def refresh(
    store: Store,
    *,
    batch: int = DEFAULT_BATCH,
    wait_s: float | None = None,
    max_bytes: int = PAGE_BYTES,
) -> int:
    """Catch every read model up with the log; return the log position reached."""
    connection = open_read_models(store, wait_s=wait_s)
    try:
        # Checkpointing every 16 MB of WAL (the default) costs more than the inserts when
        # catching up a large log; one checkpoint at close does the same work once.
        connection.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
        connection.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        return catch_up(store, connection, PROJECTIONS, batch, max_bytes=max_bytes)
    finally:
        connection.close()
