"""``evopolicy record``: look into a store: its Runs, their events, its integrity, the schemas.

Everything here reads the event log directly (no read models), so it works on
any store, including one a Run is still writing to.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evopolicygym.cli.checkout import checkout
from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import StoreGroup, store_option
from evopolicygym.cli.output import (
    clip,
    emit_json,
    flatten,
    human,
    one_line,
    print_table,
    printable,
)
from evopolicygym.cli.replay import replay
from evopolicygym.cli.stores import check_store_dir, open_existing, resolve, run_status, store_root
from evopolicygym.records.events import Envelope, EventCodecError, RunCreated
from evopolicygym.records.location import Store, open_store, store_exists
from evopolicygym.records.runs import RUN_PREFIX, overview, summarize
from evopolicygym.records.schemas import SCHEMA_DIR, check_schemas, render_schemas, write_schemas
from evopolicygym.records.store import StoreError, StreamInfo
from evopolicygym.records.timeline import public_fields
from evopolicygym.records.verify import Anchor, log_head, verify_store

__all__ = ["record", "run_summary"]

POLL_INTERVAL_S = 0.2
SUMMARY_CHARS = 120
_RAW_JSON = msgspec.json.Decoder()
_JSON_LINE = msgspec.json.Encoder()


@click.group(
    cls=StoreGroup, storeless=("schema",), short_help="Inspect and verify the event store."
)
@store_option(
    "; also accepted after the subcommand (`record list --store DIR`), where it wins",
    expose_value=False,
)
def record() -> None:
    """Inspect the record: Runs, their events, integrity and the event schemas.

    --store goes before or after the subcommand (`record --store DIR list` is
    `record list --store DIR`); given at both, the one after the subcommand is used."""


# --------------------------------------------------------------------------- helpers


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


# --------------------------------------------------------------------------- create


@record.command(short_help="Create the store (if missing).")
@click.pass_context
def create(ctx: click.Context) -> None:
    """Create the store directory and its event log; a no-op on an existing store."""
    root = store_root(ctx)
    check_store_dir(root)
    existed = store_exists(root)
    try:
        store = open_store(root, create=True)
    except (StoreError, OSError) as exc:
        raise CliError(f"cannot create a store at {root}: {exc}") from exc
    with store:
        head = store.events.head()
    if existed:
        click.echo(f"store at {root} already exists ({head} events)")
    else:
        click.echo(f"created store at {root}")


# --------------------------------------------------------------------------- list


def _run_row(store: Store, info: StreamInfo) -> dict[str, Any]:
    summary = overview(store.events, info)
    return {
        "run_id": summary.run_id,
        "stream_id": summary.stream_id,
        "version": info.version,
        "events": summary.events,
        "created_at": _iso(summary.created_at),
        "benchmark_id": summary.benchmark_id,
        "agent": summary.agent.name if summary.agent is not None else None,
        "status": run_status(store, summary),
        "terminal_reason": summary.terminal_reason,
        "assessment_score": summary.terminal_assessment_score,
    }


@record.command("list", short_help="List the Runs in the store.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array to stdout.")
@click.pass_context
def list_runs(ctx: click.Context, as_json: bool) -> None:
    """List the Runs (streams run-<id>) with their size, creation time, Benchmark and status."""
    with open_existing(store_root(ctx)) as store:
        rows = [_run_row(store, info) for info in store.events.streams(RUN_PREFIX)]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo(f"no runs in the store at {store_root(ctx)}")
        return
    # The run id is whole on one line whatever the width (it is what one copies); the
    # event counts are in --json.
    print_table(
        _console(),
        ["run", "created (UTC)", "benchmark", "agent", "status"],
        [
            [
                printable(row["run_id"], cell=True),
                _when(row["created_at"]),
                printable(row["benchmark_id"] or "-", cell=True),
                printable(row["agent"] or "-", cell=True),
                printable(row["status"], cell=True),
            ]
            for row in rows
        ],
    )


def _when(iso: str | None) -> str:
    """An ISO 8601 UTC time as a person reads it: date, hours and minutes (--json has it
    to the millisecond)."""
    return "-" if iso is None else iso[:16].replace("T", " ")


# --------------------------------------------------------------------------- show


def run_summary(store: Store, stream_id: str) -> dict[str, Any]:
    """A Run's public summary, folded from its stream. Host-private data (the pool's seeds,
    derived seeds, validation and assessment seeds) is left out: the pool shows as its size."""
    summary = summarize(store.events, stream_id)
    assessment: dict[str, Any] | None = None
    if summary.assessment_submission_id is not None:
        assessment = {
            "submission_id": summary.assessment_submission_id,
            "score": summary.assessment_score,
            "failures": summary.assessment_failures,
            "episodes": summary.assessment_episodes,
        }
    elif summary.assessment_error is not None:
        assessment = {"error": one_line(summary.assessment_error)}
    return {
        "run_id": summary.run_id,
        "stream_id": summary.stream_id,
        "events": summary.events,
        "created_at": _iso(summary.created_at),
        "status": run_status(store, summary),
        "terminal_reason": summary.terminal_reason,
        "benchmark_id": summary.benchmark_id,
        "benchmark_spec": summary.benchmark_spec,
        "agent": msgspec.to_builtins(summary.agent) if summary.agent is not None else None,
        "agent_containment": summary.agent_containment,
        "config": summary.public_config(),
        "pool_size": summary.pool_size,
        "environment_digest": summary.environment_digest,
        "initial_program_digest": summary.initial_program_digest,
        "episode_budget": summary.episode_budget,
        "budget_used": summary.budget_used,
        "budget_left": summary.budget_left,
        "submissions": [
            {
                "submission_id": s.submission_id,
                "program_digest": s.program_digest,
                "parent_program_digest": s.parent_program_digest,
                "status": s.status,
                "score": s.score,
                "failures": s.failures,
                "episodes": s.episodes,
                "validation_score": s.validation_score,
                "error": one_line(s.error) if s.error is not None else None,
            }
            for s in (summary.submissions[k] for k in sorted(summary.submissions))
        ],
        "rejections": summary.rejections,
        "agent_attempts": summary.agent_attempts,
        "agent_errors": summary.agent_errors,
        "last_agent_error": summary.last_agent_error,
        "unknown_stream_kinds": dict(sorted(summary.unknown_stream_kinds.items())),
        "best_submission_id": summary.best_submission_id,
        "final_submission_id": summary.final_submission_id,
        "final_selection": None
        if summary.final_program_digest is None
        else {
            "program_digest": summary.final_program_digest,
            "score": summary.final_score,
            "reason": summary.final_reason,
        },
        "validation_error": one_line(summary.validation_error)
        if summary.validation_error
        else None,
        "assessment": assessment,
        "validation_score": summary.final_score if summary.validation_enabled else None,
        "assessment_score": summary.assessment_score,
        "handoff": summary.handoff,
        "reference_score": summary.reference_score,
        "improved": summary.improved,
        "success": summary.success,
        "undecodable_events": summary.undecodable,
    }


def _containment(value: str | None) -> str:
    if value == "none":
        return "NONE: the Agent ran uncontained (--allow-uncontained-agent)"
    return value or "not recorded"


def _fmt(value: Any) -> str:
    return human(value)


def _agent(agent: dict[str, Any] | None) -> str:
    """Who the Agent was, each thing said once: ``reference``, ``chat (openai, model gpt-x)``."""
    if not agent:
        return "-"
    name = str(agent.get("name") or "-")
    details = [str(agent["provider"])] if agent.get("provider") not in (None, "", name) else []
    if agent.get("model"):
        details.append(f"model {agent['model']}")
    return f"{name} ({', '.join(details)})" if details else name


def _budget(summary: dict[str, Any]) -> str:
    """``8 Episodes, 3 used, 5 left``; what is left is the budget less what is used
    where the log has not said it yet."""
    used, budget, left = (
        summary["budget_used"],
        summary.get("episode_budget"),
        summary["budget_left"],
    )
    if budget is None:
        return f"{used} Episodes used (the budget is not recorded)"
    if left is None:
        left = max(budget - used, 0)
    return f"{budget} Episodes, {used} used, {left} left"


def _config(config: dict[str, Any] | None) -> str:
    if not config:
        return "-"
    return ", ".join(f"{key}={human(value)}" for key, value in flatten(config))


def _print_summary(summary: dict[str, Any]) -> None:
    console = _console()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    terminal_reason = summary["terminal_reason"]
    final = summary["final_selection"]
    assessment = summary["assessment"]
    rows: list[tuple[str, str]] = [
        ("run", summary["run_id"]),
        ("stream", f"{summary['stream_id']} ({summary['events']} events)"),
        ("created", summary["created_at"] or "-"),
        ("status", summary["status"]),
        ("benchmark", summary["benchmark_id"] or "-"),
        ("agent", _agent(summary["agent"])),
        ("agent jail", _containment(summary["agent_containment"])),
        ("config", _config(summary["config"])),
        ("pool", "-" if summary["pool_size"] is None else f"{summary['pool_size']} Episodes"),
        ("initial program", summary["initial_program_digest"] or "-"),
        ("budget", _budget(summary)),
        ("rejected", str(summary["rejections"])),
    ]
    if summary["agent_errors"]:
        last = summary["last_agent_error"]
        rows.append(
            ("agent errors", f"{summary['agent_errors']}" + (f" (last: {last})" if last else ""))
        )
    if summary["unknown_stream_kinds"]:
        kinds = ", ".join(
            f"{kind} {count}" for kind, count in summary["unknown_stream_kinds"].items()
        )
        rows.append(("unparsed lines", kinds))
    if final is not None:
        score = "" if final["score"] is None else f", validation score {_fmt(final['score'])}"
        rows.append(("final", f"submission {summary['final_submission_id']}{score}"))
    if summary["validation_error"]:
        rows.append(("validation", f"failed: {summary['validation_error']}"))
    if assessment is not None:
        if "error" in assessment:
            rows.append(("assessment", f"failed: {assessment['error']}"))
        else:
            rows.append(
                (
                    "assessment",
                    f"submission {assessment['submission_id']}: {_fmt(assessment['score'])} "
                    f"({assessment['failures']} failures in {assessment['episodes']} Episodes)",
                )
            )
    if terminal_reason is not None:
        rows.append(("terminal", terminal_reason))
        improved = {True: "yes", False: "no", None: "not measured"}[summary["improved"]]
        rows.append(
            (
                "outcome",
                f"handoff {summary['handoff']}, improved on the initial program: {improved}, "
                f"success: {'yes' if summary['success'] else 'no'}",
            )
        )
    if summary["undecodable_events"]:
        positions = ", ".join(str(p) for p in summary["undecodable_events"])
        rows.append(
            ("undecodable", f"positions {positions} (run `{cli_command('record', 'verify')}`)")
        )
    for key, value in rows:
        grid.add_row(key, escape(printable(value)))
    console.print(grid)
    if not summary["submissions"]:
        return
    console.print()
    print_table(
        console,
        ["#", "status", "score", "failures", "episodes", "validation", "program"],
        [
            [
                str(entry["submission_id"]),
                printable(entry["status"], cell=True),
                _fmt(entry["score"]),
                _fmt(entry["failures"]),
                str(entry["episodes"]),
                _fmt(entry["validation_score"]),
                _digest(entry["program_digest"]),
            ]
            for entry in summary["submissions"]
        ],
        keys=(0, 6),
    )


@record.command(short_help="Summarise one Run.")
@click.argument("run", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.pass_context
def show(ctx: click.Context, run: str, as_json: bool) -> None:
    """Summarise RUN (its id, run-<id>, `latest` or a unique prefix of an id): config,
    Benchmark, Agent, submissions and scores, and how it ended. Host-private data (the
    pool's seeds, derived seeds) is never shown."""
    with open_existing(store_root(ctx)) as store:
        summary = run_summary(store, resolve(store, run))
    if as_json:
        emit_json(summary)
    else:
        _print_summary(summary)


# --------------------------------------------------------------------------- events


def _digest(value: str | None) -> str:
    """A digest shortened for a terminal (``--json`` has them in full)."""
    if value is None:
        return "-"
    return value[:19] + "…" if value.startswith("sha256:") and len(value) > 19 else value


SHORT_CHARS = 40  # of one value in an event's one-line summary


def _short(value: Any) -> str:
    if isinstance(value, str):
        if value.startswith("sha256:") and len(value) == 71:
            return _digest(value)
        return human(one_line(value), SHORT_CHARS)
    if isinstance(value, bool):
        return "true" if value else "false"
    return human(value, SHORT_CHARS)


def payload_summary(envelope: Envelope, failure_score: float | None = None) -> str:
    """A one-line summary of a payload without Host-private fields; a failed Episode's
    return followed by the ``failure_score`` it counted at (its recorded return was not)."""
    try:
        data = _RAW_JSON.decode(envelope.payload)
    except msgspec.DecodeError:
        return "(payload is not JSON)"
    if not isinstance(data, dict):
        return "(payload is not an object)"
    parts: list[str] = []
    if (
        envelope.type == "EpisodeCompleted"
        and data.get("status") not in (None, "ok")
        and failure_score is not None
    ):
        # First, so a clipped line keeps it: what it played, then what it counted at.
        parts.append(
            f"total_reward={_short(data.pop('total_reward', None))} "
            f"(failed: scored at the failure score {human(failure_score)})"
        )
    parts += [f"{key}={_short(value)}" for key, value in public_fields(envelope.type, data)]
    return clip(" ".join(parts), SUMMARY_CHARS)


def envelope_json(envelope: Envelope) -> dict[str, Any]:
    """The full envelope as JSON values, the payload decoded (not upcast) as JSON."""
    view: dict[str, Any] = {
        "position": envelope.position,
        "stream_id": envelope.stream_id,
        "stream_version": envelope.stream_version,
        "event_id": envelope.event_id,
        "type": envelope.type,
        "schema_version": envelope.schema_version,
        "recorded_at": envelope.recorded_at,
        "payload": None,
        "payload_hash": envelope.payload_hash,
        "prev_hash": envelope.prev_hash,
        "hash": envelope.hash,
    }
    try:
        view["payload"] = _RAW_JSON.decode(envelope.payload)
    except msgspec.DecodeError as exc:
        view["payload_error"] = f"not JSON: {exc}"
        view["payload_text"] = bytes(envelope.payload).decode("utf-8", "replace")
    return view


def _finished_before(store: Store, stream_id: str, after: int) -> bool:
    """Whether the Run's last event is a RunFinished at or before version ``after`` (so
    following it from there would wait forever)."""
    current = next(
        (s.version for s in store.events.streams(stream_id) if s.stream_id == stream_id), 0
    )
    if current < 1 or current > after:
        return False
    last = next(iter(store.events.read_stream(stream_id, current - 1)), None)
    return last is not None and last.type == "RunFinished"


def _event_line(envelope: Envelope, failure_score: float | None = None) -> str:
    return printable(
        f"{envelope.position:>7}  v{envelope.stream_version:<5} {_iso(envelope.recorded_at)}  "
        f"{envelope.type:<24} {payload_summary(envelope, failure_score)}"
    )


def _failure_score(store: Store, stream_id: str) -> float | None:
    """The failure score of the Run's Benchmark, as its RunCreated records it."""
    first = next(iter(store.events.read_stream(stream_id, 0)), None)
    try:
        event = first.event() if first is not None else None
    except EventCodecError:
        return None
    if not isinstance(event, RunCreated):
        return None
    score = event.benchmark_spec.get("failure_score")
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None


@record.command(short_help="Print a Run's events.")
@click.argument("run", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event (a line).")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing new events until the Run finishes."
)
@click.option(
    "--from-version",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Only events after stream version N.",
)
@click.pass_context
def events(ctx: click.Context, run: str, as_json: bool, follow: bool, from_version: int) -> None:
    """Print the events of RUN (its id, run-<id>, `latest` or a unique prefix of an id) in order.

    With --follow, keep polling for new events until a RunFinished event is
    printed or Ctrl-C. --json prints the full envelopes, payload included.
    """
    with open_existing(store_root(ctx)) as store:
        stream_id = resolve(store, run)
        failure_score = None if as_json else _failure_score(store, stream_id)
        last = from_version
        try:
            while True:
                finished = False
                for envelope in store.events.read_stream(stream_id, last):
                    line = (
                        _JSON_LINE.encode(envelope_json(envelope)).decode()
                        if as_json
                        else _event_line(envelope, failure_score)
                    )
                    click.echo(line)
                    last = envelope.stream_version
                    if envelope.type == "RunFinished":
                        finished = True
                        break
                sys.stdout.flush()
                if finished or not follow or _finished_before(store, stream_id, last):
                    return
                time.sleep(POLL_INTERVAL_S)
        except KeyboardInterrupt:
            return
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly, and let exit not flush again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)


# --------------------------------------------------------------------------- verify


@record.command(short_help="Print the log's head (POSITION:HASH), to keep outside the store.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.pass_context
def head(ctx: click.Context, as_json: bool) -> None:
    """Print the log's last position and that event's chain hash as POSITION:HASH.

    Kept somewhere the store's owner cannot rewrite (a ticket, a paper, a commit), it
    lets `record verify --anchor POSITION:HASH` tell later whether the log still extends
    it: a log whose tail was removed, or whose chain was recomputed after an edit, passes
    every check of its own but no longer holds that hash at that position.
    """
    with open_existing(store_root(ctx)) as store:
        anchor = log_head(store)
    if as_json:
        emit_json({"position": anchor.position, "hash": anchor.hash, "anchor": str(anchor)})
    else:
        click.echo(str(anchor))


@record.command(short_help="Verify the log's hash chain and the blobs it references.")
@click.argument("run", metavar="[RUN]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.option(
    "--anchor",
    metavar="POSITION:HASH",
    help="A head printed earlier by `record head`: the log must still extend it.",
)
@click.pass_context
def verify(ctx: click.Context, run: str | None, as_json: bool, anchor: str | None) -> None:
    """Check positions, stream versions, payload hashes, the hash chain, that every payload
    decodes, and that every referenced blob and Program is stored intact; with --anchor,
    that the log still holds that head (not truncated, not rechained since).

    With RUN (its id, run-<id>, `latest` or a unique prefix of an id), only that Run's
    problems are reported (and any break of the global chain, which is walked in full).
    Exit status 1 when anything is wrong.
    """
    try:
        kept = Anchor.parse(anchor) if anchor is not None else None
    except ValueError as exc:
        raise CliUsageError(str(exc)) from exc
    with open_existing(store_root(ctx)) as store:
        stream_id = resolve(store, run) if run is not None else None
        report = verify_store(store, stream_id, kept)
    if as_json:
        emit_json(report.to_dict())
        if not report.ok:
            ctx.exit(1)
        return
    first = report.first_problem
    if first is None:
        click.echo(f"ok: {report.events} events, {report.blobs} blobs verified")
        return
    for problem in report.problems:
        click.echo(problem.describe())
    count = len(report.problems)
    raise CliError(
        f"{count} problem{'s' if count != 1 else ''} in {report.events} events; "
        f"first: {first.describe()}"
    )


# --------------------------------------------------------------------------- schema


@record.command(short_help="Write (or --check) the event JSON Schemas.")
@click.option("--check", is_flag=True, help="Compare instead of writing; exit 1 on drift.")
@click.option(
    "--output",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Schema directory [default: ./{SCHEMA_DIR}].",
)
def schema(check: bool, output: Path | None) -> None:
    """Write one JSON Schema per event type (<Type>.json), or compare them with --check."""
    directory = output if output is not None else SCHEMA_DIR
    if check:
        problems = check_schemas(directory)
        if problems:
            raise CliError(
                f"{len(problems)} schema file(s) differ from the code: {'; '.join(problems)} "
                "(regenerate with "
                f"`{cli_command('record', 'schema', '--output', directory, takes_store=False)}`)"
            )
        click.echo(f"ok: {len(render_schemas())} schemas in {directory} match the code")
        return
    try:
        changed = write_schemas(directory)
    except OSError as exc:
        raise CliError(f"cannot write schemas to {directory}: {exc}") from exc
    click.echo(f"wrote {len(render_schemas())} schemas to {directory} ({len(changed)} changed)")


record.add_command(checkout)
record.add_command(replay)

from evopolicygym.cli.agent_logs import logs  # noqa: E402

record.add_command(logs)
