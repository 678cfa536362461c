"""The viewer's index of a store's Runs: one row per Run, in a SQLite file of its own.

The list page filters, sorts and pages Runs in SQL over this file, so a store of 10,000 Runs
and a million events serves its first page from an index lookup, and the server holds one
page in memory, not the store. The file is a cache: it lives outside the store (the viewer
never writes the log or the blobs), is derived from the log only, and is rebuilt whenever it
does not match the store it names.

Catching up: the first time, one row per Run stream from its first and last events
(``records.runs.overview``: who, what, how it ended); after that, only the streams that
grew since the position the index last reached. A Run that grows while the viewer runs is
folded in full once and then event by event (``RunSummary.apply``), so a live Run's row has
its budget used and best score so far; a Run indexed from its overview has neither until it
is next recorded (the list shows a dash).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evopolicygym.records.location import Store
from evopolicygym.records.runs import RUN_PREFIX, RunSummary, overview, summarize
from evopolicygym.records.store import StreamInfo

__all__ = [
    "FILTERS",
    "PAGE_SIZE",
    "SORTS",
    "IndexPage",
    "RunIndex",
    "RunRow",
    "default_cache_dir",
]

FORMAT = "3"  # bump when the table changes: an index of another format is rebuilt
PAGE_SIZE = 50
SCAN_LIMIT = 20_000  # events read per step of an incremental catch-up
FULL_SCAN_AFTER = 200_000  # more new events than this: compare every stream's version instead
LIVE_FOLDS = 64  # Runs kept folded in memory (the ones recorded while the viewer runs)

_COLUMNS = (
    ("run_id", "TEXT PRIMARY KEY"),
    ("version", "INTEGER NOT NULL"),
    ("created_at", "INTEGER"),
    ("updated_at", "INTEGER"),
    ("benchmark", "TEXT"),
    ("agent", "TEXT"),
    ("provider", "TEXT"),
    ("model", "TEXT"),
    ("status", "TEXT"),
    ("handoff", "TEXT"),
    ("improved", "INTEGER"),
    ("success", "INTEGER"),
    ("score", "REAL"),
    ("score_kind", "TEXT"),
    ("direction", "TEXT"),
    ("budget", "INTEGER"),
    ("budget_used", "INTEGER"),
    ("submissions", "INTEGER"),
)
NAMES = tuple(name for name, _ in _COLUMNS)
# What the list may be filtered by (exact values) and sorted by (column, default order).
FILTERS = ("benchmark", "agent", "model", "status")
SORTS: Mapping[str, str] = {
    "created": "created_at",
    "updated": "updated_at",
    "score": "score",
    "benchmark": "benchmark",
    "agent": "agent",
    "status": "status",
    "events": "version",
}


@dataclass(frozen=True)
class RunRow:
    run_id: str
    version: int  # events in the Run's stream
    created_at: int | None  # ns
    updated_at: int | None
    benchmark: str | None
    agent: str | None
    provider: str | None
    model: str | None
    status: str
    handoff: str | None
    improved: bool | None
    success: bool | None
    score: float | None
    score_kind: str | None  # assessment, validation or best so far
    direction: str | None
    budget: int | None
    budget_used: int | None
    submissions: int | None


@dataclass(frozen=True)
class IndexPage:
    rows: list[RunRow]
    total: int  # Runs matching the filters
    page: int  # from 1
    pages: int
    choices: dict[str, list[tuple[str, int]]]  # per filter: values and their counts


def default_cache_dir() -> Path:
    """``$EVOPOLICY_VIEW_CACHE``, else the user's cache directory (XDG)."""
    given = os.environ.get("EVOPOLICY_VIEW_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evopolicygym" / "view"


def row_of(summary: RunSummary, *, folded: bool) -> tuple[Any, ...]:
    """The index row of a Run's summary (``NAMES`` order); ``folded``: from every event (an
    overview knows neither the budget used nor the Submissions)."""
    agent = summary.agent
    if summary.terminal_assessment_score is not None or summary.assessment_score is not None:
        score, kind = summary.assessment_score or summary.terminal_assessment_score, "assessment"
    elif summary.final_score is not None:
        score, kind = summary.final_score, "validation"
    elif summary.best_score is not None:
        score, kind = summary.best_score, "best so far"
    else:
        score, kind = None, None
    return (
        summary.run_id,
        summary.events,
        summary.created_at,
        summary.updated_at,
        summary.benchmark_id,
        agent.name if agent is not None else None,
        agent.provider if agent is not None else None,
        agent.model if agent is not None else None,
        summary.status,
        summary.handoff if summary.created else None,
        None if summary.improved is None else int(summary.improved),
        int(summary.success) if summary.finished else None,
        score,
        kind,
        summary.score_direction if summary.created else None,
        summary.episode_budget,
        summary.budget_used if folded else None,
        summary.started if folded else None,
    )


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _run_row(values: Sequence[Any]) -> RunRow:
    data = dict(zip(NAMES, values, strict=True))
    data["improved"], data["success"] = _bool(data["improved"]), _bool(data["success"])
    return RunRow(**data)


class RunIndex:
    """The index of ``store``'s Runs in ``cache_dir``; ``refresh`` catches it up.
    Thread-safe: refreshes are serialized, pages read from their own connection."""

    def __init__(
        self,
        store: Store,
        cache_dir: Path,
        *,
        host_alive: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self._host_alive = host_alive
        key = hashlib.sha256(str(store.location).encode()).hexdigest()[:24]
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = cache_dir / f"runs-{key}.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")  # a cache: a lost tail is rebuilt
        self._live: dict[str, RunSummary] = {}  # stream id -> a Run folded as it grows
        self._prepare()

    # ------------------------------------------------------------------ the file

    def _prepare(self) -> None:
        db = self._db
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        found = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if found.get("format") != FORMAT or not self._same_store(found):
            db.execute("DROP TABLE IF EXISTS runs")
            db.execute("DELETE FROM meta")
            db.execute("INSERT INTO meta VALUES ('format', ?), ('position', '0')", (FORMAT,))
        columns = ", ".join(f"{name} {kind}" for name, kind in _COLUMNS)
        db.execute(f"CREATE TABLE IF NOT EXISTS runs ({columns})")
        for name in ("created_at", "updated_at", "score", "version"):
            db.execute(f"CREATE INDEX IF NOT EXISTS runs_{name} ON runs ({name})")
        for name in FILTERS:
            db.execute(f"CREATE INDEX IF NOT EXISTS runs_{name} ON runs ({name}, created_at)")

    def _same_store(self, meta: Mapping[str, str]) -> bool:
        """Whether the log still holds the event the index last read, as it read it: a store
        replaced or rewritten at the same location is indexed again from scratch."""
        position = int(meta.get("position", "0"))
        if position == 0:
            return True
        found = self.store.events.read_all_rows(position - 1, 1)
        return bool(found) and found[0][0] == position and found[0][-1] == meta.get("hash")

    def position(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'position'").fetchone()
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ catching up

    def refresh(self) -> tuple[int, set[str]]:
        """Catch the index up with the log: the log position reached, and the Runs whose rows
        changed."""
        with self._lock:
            head = self.store.events.head()
            position = self.position()
            if head == position:
                return head, set()
            if position == 0 or head - position > FULL_SCAN_AFTER:
                rows = self._rescan()
            else:
                rows, head = self._follow(position, head)
            self._write(rows, head)
            return head, {row[0] for row in rows}

    def _rescan(self) -> list[tuple[Any, ...]]:
        """Every Run stream whose version differs from its row (all of them, the first time)."""
        known = dict(self._db.execute("SELECT 'run-' || run_id, version FROM runs").fetchall())
        return [
            self._row(info)
            for info in self.store.events.streams(RUN_PREFIX)
            if known.get(info.stream_id) != info.version
        ]

    def _follow(self, position: int, head: int) -> tuple[list[tuple[Any, ...]], int]:
        """The streams that grew since ``position``: only the new events are read."""
        grown: dict[str, int] = {}
        while position < head:
            batch = self.store.events.read_event_rows(position, SCAN_LIMIT)
            if not batch:
                break
            for row in batch:
                stream_id = row[1]
                if stream_id.startswith(RUN_PREFIX):
                    grown[stream_id] = max(grown.get(stream_id, 0), row[2])
            position = batch[-1][0]
        return [self._grown(sid, version) for sid, version in grown.items()], position

    def _row(self, info: StreamInfo) -> tuple[Any, ...]:
        if info.stream_id not in self._live:
            summary = overview(self.store.events, info)
            if summary.finished:
                return row_of(summary, folded=False)
        # A Run still going: folded in full, so its row has its budget used and best so far.
        return self._grown(info.stream_id, info.version)

    def _grown(self, stream_id: str, version: int) -> tuple[Any, ...]:
        """A Run being recorded: folded in full once, then by its new events only."""
        summary = self._live.pop(stream_id, None)
        if summary is None:
            summary = summarize(self.store.events, stream_id)
        elif summary.events < version:
            for envelope in self.store.events.read_stream(stream_id, summary.events):
                summary.apply(envelope.event(), version=envelope.stream_version)
                summary.updated_at = envelope.recorded_at
        if not summary.finished:
            self._live[stream_id] = summary  # most recent last
            while len(self._live) > LIVE_FOLDS:
                self._live.pop(next(iter(self._live)))
        return row_of(summary, folded=True)

    def _write(self, rows: list[tuple[Any, ...]], position: int) -> None:
        hashes = self.store.events.read_all_rows(position - 1, 1) if position else []
        marks = ", ".join("?" for _ in NAMES)
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany(f"INSERT OR REPLACE INTO runs VALUES ({marks})", rows)
            db.execute("UPDATE meta SET value = ? WHERE key = 'position'", (str(position),))
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('hash', ?)",
                (hashes[0][-1] if hashes else None,),
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # ------------------------------------------------------------------ reading

    def page(
        self,
        filters: Mapping[str, str],
        *,
        sort: str = "created",
        descending: bool = True,
        page: int = 1,
        since_ns: int | None = None,
        until_ns: int | None = None,
        size: int = PAGE_SIZE,
    ) -> IndexPage:
        """One page of the Runs matching ``filters`` (exact values of ``FILTERS``)."""
        where: list[str] = []
        args: list[Any] = []
        for name in FILTERS:
            value = filters.get(name)
            if value:
                where.append(f"{name} = ?")
                args.append(value)
        if since_ns is not None:
            where.append("created_at >= ?")
            args.append(since_ns)
        if until_ns is not None:
            where.append("created_at < ?")
            args.append(until_ns)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        column = SORTS.get(sort, "created_at")
        order = "DESC" if descending else "ASC"
        with self._lock:
            db = self._db
            total = db.execute(f"SELECT count(*) FROM runs {clause}", args).fetchone()[0]
            pages = max(1, -(-total // size))
            page = min(max(page, 1), pages)
            found = db.execute(
                f"SELECT {', '.join(NAMES)} FROM runs {clause} "
                f"ORDER BY {column} IS NULL, {column} {order}, run_id {order} LIMIT ? OFFSET ?",
                [*args, size, (page - 1) * size],
            ).fetchall()
            choices = {
                name: [
                    (str(value), count)
                    for value, count in db.execute(
                        f"SELECT {name}, count(*) FROM runs WHERE {name} IS NOT NULL "
                        f"GROUP BY {name} ORDER BY {name} LIMIT 500"
                    ).fetchall()
                ]
                for name in FILTERS
            }
        rows = [self._alive(_run_row(values)) for values in found]
        return IndexPage(rows, total, page, pages, choices)

    def get(self, run_id: str) -> RunRow | None:
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(NAMES)} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if found is None else self._alive(_run_row(found))

    def _alive(self, row: RunRow) -> RunRow:
        """A Run the log calls running but that no Host holds is ``interrupted``."""
        if row.status != "running" or self._host_alive is None:
            return row
        if self._host_alive(row.run_id):
            return row
        return RunRow(**{**row.__dict__, "status": "interrupted"})

    def close(self) -> None:
        with self._lock:
            self._db.close()
