"""``evopolicy query``: DuckDB SQL over the store's read models.

The read models (``events``, ``runs``, ``submissions``, ``episodes``) are
caught up with the log first, unless ``--no-refresh``; the query then runs on
a read-only connection, so it cannot change them.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import duckdb
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evopolicygym.cli.errors import CliError, CliUsageError, emit_json, one_line
from evopolicygym.records.location import STORE_ENV, open_store, resolve_store_path
from evopolicygym.records.read_models import open_read_models, refresh
from evopolicygym.records.store import StoreError

__all__ = ["query"]

_JSON = msgspec.json.Decoder()


@click.command(short_help="Run SQL over the store's read models.")
@click.argument("sql", metavar="SQL")
@click.option(
    "--store",
    "store_dir",
    metavar="DIR",
    default=None,
    help=f"Store directory [default: ${STORE_ENV}, else ./evopolicy-store].",
)
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
    \b
    Example:
      evopolicy query "SELECT run_id, status, best_score FROM runs ORDER BY created_at"
    """
    if as_json and as_csv:
        raise CliUsageError("--json and --csv are mutually exclusive")
    columns, kinds, rows = _run(resolve_store_path(store_dir), sql, refresh_first=not no_refresh)
    if as_json:
        emit_json([dict(zip(columns, _json_row(row, kinds), strict=True)) for row in rows])
    elif as_csv:
        _print_csv(columns, rows)
    else:
        _print_table(columns, rows)


def _run(
    root: Path, sql: str, *, refresh_first: bool
) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    if not (root / "events.db").exists():
        raise CliError(f"no store at {root} (point --store or {STORE_ENV} at an existing store)")
    try:
        with open_store(root) as store:
            if refresh_first:
                refresh(store)
            connection = open_read_models(store, read_only=True)
    except StoreError as exc:
        raise CliError(str(exc)) from exc
    try:
        result = connection.execute(sql)
        if result.description is None:  # a statement without a result
            return [], [], []
        columns = [column[0] for column in result.description]
        kinds = [str(column[1]) for column in result.description]
        return columns, kinds, result.fetchall()
    except duckdb.Error as exc:
        raise CliError(f"query failed: {one_line(str(exc))}") from exc
    finally:
        connection.close()


def _plain(value: Any) -> Any:
    """A value msgspec can encode as JSON the way a reader expects it."""
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
    click.echo(out.getvalue(), nl=False)


def _print_table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    console = Console()
    if not columns:
        return
    table = Table(*(escape(column) for column in columns))
    for row in rows:
        table.add_row(*("[dim]NULL[/]" if value is None else escape(_text(value)) for value in row))
    console.print(table)
    console.print(f"[dim]{len(rows)} row{'' if len(rows) == 1 else 's'}[/]")
