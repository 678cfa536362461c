"""``evopolicy query``: DuckDB SQL over the store's read models.

The read models (``events``, ``runs``, ``submissions``, ``episodes``) are
caught up with the log first, unless ``--no-refresh``; the query then runs on
a read-only connection with DuckDB's external access off and its settings
locked, so it can change neither them nor any file (the log among them), read
no other file, and load or fetch no extension.

DuckDB lets one process write the read models or any number of processes read
them. When another process holds them so that they cannot be caught up, the
query runs on them as they are, with a note on stderr that the results may be
stale; while another process writes them (a long first catch-up) the query
waits for as long as that writer keeps writing. Only when they can be neither
caught up nor read is it an error.

Values reach the terminal escaped: a recorded string (a policy's output, an
error) is untrusted, and its control characters must not drive the terminal.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import math
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import duckdb
import msgspec
from rich.console import Console

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.options import store_option
from evopolicygym.cli.output import emit_json, one_line, print_table, printable
from evopolicygym.records import read_models
from evopolicygym.records.location import (
    STORE_ENV,
    Store,
    StoreUrl,
    open_store,
    resolve_store,
    store_exists,
)
from evopolicygym.records.projections import DEFAULT_BATCH, PAGE_BYTES, catch_up
from evopolicygym.records.read_models import ReadModelsBusy, lock_down, open_read_models, refresh
from evopolicygym.records.store import StoreError
from evopolicygym.run.liveness import host_alive

__all__ = ["query"]

_JSON = msgspec.json.Decoder()
_GRACE_S = 1.0  # how long to try to catch up before querying the read models as they are
_MAX_WAIT_S = 600.0  # the longest wait for another process that keeps writing them
_NOTE_AFTER_S = 5.0  # say why we wait once we have waited this long
STALE_NOTE = (
    "note: the read models are in use by another process and were not caught up "
    "with the log; results may be stale"
)
BUSY_ERROR = "read models are in use by another process; try again"


@click.command(short_help="Run SQL over the store's read models.")
@click.argument("sql", metavar="SQL")
@store_option()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects to stdout.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row to stdout.")
@click.option(
    "--no-refresh", is_flag=True, help="Query the read models as they are; do not catch up first."
)
def query(sql: str, store_dir: str | None, as_json: bool, as_csv: bool, no_refresh: bool) -> None:
    """Run SQL (DuckDB dialect) over the read models of the store.

    \b
    Tables:
      events       one row per event: position, stream_id, stream_version, event_id,
                   type, schema_version, recorded_at, run_id, payload (JSON)
      runs         one row per Run: benchmark, agent, status, budget, best, final,
                   validation and assessment scores
      submissions  one row per evaluated Submission: digest, indices, status, score
      episodes     one row per completed Episode of a Submission
      projection_checkpoints  how far each table has caught up with the log
    Timestamps are UTC. payload is JSON: payload->>'$.field' extracts a field.
    With --json, timestamps are ISO 8601 with a Z suffix, and NaN and infinite
    numbers, which JSON cannot hold, are the strings "NaN", "Infinity" and
    "-Infinity". The table escapes control characters (ESC as \\x1b); --json
    and --csv print values exactly.
    \b
    Example:
      evopolicy query "SELECT run_id, status, best_score FROM runs ORDER BY created_at"
    """
    if as_json and as_csv:
        raise CliUsageError("--json and --csv are mutually exclusive")
    columns, kinds, rows = _run(resolve_store(store_dir), sql, refresh_first=not no_refresh)
    if as_json:
        emit_json([dict(zip(columns, _json_row(row, kinds), strict=True)) for row in rows])
    elif as_csv:
        _print_csv(columns, rows)
    else:
        _print_table(columns, rows)


def _run(
    root: Path | StoreUrl, sql: str, *, refresh_first: bool
) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    if not store_exists(root):
        raise CliError(f"no store at {root} (point --store or {STORE_ENV} at an existing store)")
    try:
        with open_store(root) as store:
            # A read-only store cannot have been appended to since its read models were last
            # caught up, and they cannot be written: query them as they are.
            connection = _connect(store, refresh_first and not store.read_only)
    except StoreError as exc:
        raise CliError(printable(one_line(str(exc)))) from exc
    try:
        result = connection.execute(sql)
        if result is None:  # nothing but whitespace, comments or semicolons
            raise CliError("no statement to run")
        if result.description is None:  # a statement without a result
            return [], [], []
        columns = [column[0] for column in result.description]
        kinds = [str(column[1]) for column in result.description]
        return columns, kinds, result.fetchall()
    except duckdb.Error as exc:
        raise CliError(f"query failed: {printable(one_line(str(exc)))}") from exc
    finally:
        connection.close()


def _connect(store: Store, refresh_first: bool) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the read models, caught up first if ``refresh_first``.

    While another process holds them, keep trying for ``LOCK_WAIT_S`` (longer while
    it keeps writing them); after ``_GRACE_S`` without catching up, settle for
    reading them as they are, with a note on stderr."""
    wait = read_models.LOCK_WAIT_S
    started = time.monotonic()
    grace, deadline = started + min(_GRACE_S, wait), started + wait
    pending, noted, delay = refresh_first, False, 0.02
    while True:
        if pending and _caught_up(store):
            pending = False
        if not pending or time.monotonic() >= grace:
            connection = _read_only(store)
            if connection is not None and pending:
                # Nobody is writing them now: a writer that held them a moment ago may have
                # just let go, so try once more to catch up before settling for stale results.
                connection.close()
                if _caught_up(store):
                    pending = False
                    continue
                connection = _read_only(store)
                if connection is not None:
                    click.echo(STALE_NOTE, err=True)
            if connection is not None:
                return connection
        now = time.monotonic()
        if now >= deadline:
            if now - started >= _MAX_WAIT_S or not _being_written(store, wait):
                raise CliError(BUSY_ERROR)
            if not noted and now - started >= max(wait, _NOTE_AFTER_S):
                click.echo(
                    "note: waiting for another process to finish writing the read models",
                    err=True,
                )
                noted = True
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def _caught_up(store: Store) -> bool:
    """Catch the read models up now if nobody else holds them; whether that happened."""
    try:
        refresh(store, wait_s=0)
    except ReadModelsBusy:
        return False
    except StoreError:
        raise
    except Exception as exc:  # a bug or a damaged file: one line, never a traceback
        raise CliError(
            f"cannot catch the read models up with the log: {type(exc).__name__}: "
            f"{printable(one_line(str(exc)))} (--no-refresh queries them as they are)"
        ) from exc
    return True


def _read_only(store: Store) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to the read models, or None while a writer holds them."""
    try:
        if store.read_only and not store.read_models_path.exists():
            connection = _in_memory(store)
        else:
            connection = open_read_models(store, read_only=True, wait_s=0)
    except ReadModelsBusy:
        return None
    _runs_as_listed(connection, store)
    # The user's SQL reads the read models and nothing else: no file (the log is one),
    # no extension, no setting to undo that.
    return lock_down(connection)


def _in_memory(store: Store) -> duckdb.DuckDBPyConnection:
    """The read models of a read-only store that has none on disk, built in memory."""
    connection = duckdb.connect(":memory:")
    connection.execute(f"SET memory_limit = '{read_models.MEMORY_LIMIT}'")
    catch_up(store, connection, read_models.PROJECTIONS, DEFAULT_BATCH, max_bytes=PAGE_BYTES)
    return connection


def _runs_as_listed(connection: duckdb.DuckDBPyConnection, store: Store) -> None:
    """``runs`` as ``record list`` tells it: a Run whose log says it is running but that no
    Host holds is ``interrupted`` (its Host died without a word; the log cannot say so)."""
    connection.create_function(
        "evopolicy_host_alive",
        lambda run_id: host_alive(store, run_id),
        ["VARCHAR"],
        "BOOLEAN",
        side_effects=True,
    )
    database = connection.execute("SELECT current_database()").fetchone()
    name = str(database[0]).replace('"', '""') if database else "main"
    connection.execute(
        "CREATE TEMP VIEW runs AS SELECT * REPLACE (CASE WHEN status = 'running' "
        "AND NOT evopolicy_host_alive(run_id) THEN 'interrupted' ELSE status END AS status) "
        f'FROM "{name}".main.runs'
    )


def _being_written(store: Store, within: float) -> bool:
    """Whether the read-model files changed in the last ``within`` seconds."""
    path = store.read_models_path
    newest = 0.0
    for name in (path, path.with_name(path.name + ".wal")):
        try:
            newest = max(newest, name.stat().st_mtime)
        except OSError:
            continue
    return time.time() - newest < within


def _plain(value: Any) -> Any:
    """A value msgspec can encode as JSON the way a reader expects it."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dt.datetime):  # naive ones are TIMESTAMPs, which are UTC
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _json_row(row: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    values = []
    for value, kind in zip(row, kinds, strict=True):
        if kind == "JSON" and isinstance(value, str):
            try:
                values.append(_JSON.decode(value))
            except msgspec.DecodeError:
                values.append(value)
        else:
            values.append(_plain(value))
    return values


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, list | dict | tuple):
        return msgspec.json.encode(_plain(value)).decode()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _print_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    if not columns:
        return
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_text(value) for value in row])
    click.echo(out.getvalue(), nl=False, color=True)  # color: click must not strip ESC


def _print_table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """A table in the terminal's width: identifier columns (``*_id``) whole, the others
    wrapped; one block per row (``column value``) when the columns do not fit side by side."""
    from rich.text import Text

    console = Console()
    if not columns:
        return
    keys = [i for i, column in enumerate(columns) if column == "id" or column.endswith("_id")]
    print_table(
        console,
        [printable(column, cell=True) for column in columns],
        [
            [
                Text("NULL", style="dim")
                if value is None
                else ("true" if value else "false")
                if isinstance(value, bool)
                else printable(_text(value), cell=True)
                for value in row
            ]
            for row in rows
        ],
        keys=keys,
    )
    console.print(f"[dim]{len(rows)} row{'' if len(rows) == 1 else 's'}[/]")
