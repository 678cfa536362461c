"""``evopolicy report``: one self-contained HTML page of a Run or of an experiment."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import not_empty, store_option
from evopolicygym.cli.output import emit_json
from evopolicygym.cli.stores import open_existing, resolve, run_status, store_root

if TYPE_CHECKING:
    from evopolicygym.records.location import Store
    from evopolicygym.report import Report

__all__ = ["report"]


def _check_target(path: Path) -> None:
    """A place the report cannot be written is told before anything is read."""
    if path.is_dir():
        raise CliError(f"-o {path}: is a directory (give the report's file name)")
    if not path.parent.is_dir():
        raise CliError(f"-o {path}: no directory {path.parent} to write it in")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise CliError(f"-o {path}: cannot write in {path.parent} (permission denied)")


def _write(path: Path, text: str) -> int:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed over it);
    the bytes written. An unwritable place is one ``error:`` line."""
    data = text.encode("utf-8")
    parent = path.parent
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise CliError(f"-o {path}: cannot write there: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise CliError(f"-o {path}: cannot write there: {exc.strerror or exc}") from exc
    return len(data)


@click.command(
    "report", short_help="Write one self-contained HTML report of a Run or an experiment."
)
@click.argument("run", required=False, callback=not_empty)
@click.option(
    "--experiment",
    metavar="E",
    callback=not_empty,
    help="Report on this experiment instead of one Run.",
)
@click.option(
    "--output",
    "-o",
    required=True,
    metavar="FILE",
    help="HTML file to write (replaced if it exists).",
)
@store_option()
@click.option("--json", "as_json", is_flag=True, help="Print {path, bytes, runs} as JSON.")
def report(
    run: str | None, experiment: str | None, output: str, store_dir: str | None, as_json: bool
) -> None:
    """Write one HTML page about RUN (its id, run-<id>, `latest` or a unique prefix of an
    id) or about the experiment E: plots, tables, diffs and the transcript, with its scripts,
    styles and plotly inlined, so the file opens in any browser offline.

    \b
    A Run's page: its facts, timeline, score per Submission, best so far vs Episodes used,
    a diff of each Submission against its parent, the transcript, Validation and Assessment.
    An experiment's page: the leaderboard (rank score, intervals), best-so-far curves per
    agent and Benchmark, selection validity and edit dynamics.
    """
    if (run is None) == (experiment is None):
        raise CliUsageError("give a RUN or --experiment E (one of them)")
    from evopolicygym.records.runs import overview
    from evopolicygym.redaction import Redactor
    from evopolicygym.report import run_report

    # The exports' redactor: credentials by their shapes (their values are known to the
    # Host only while a Run runs).
    redact = Redactor().text
    target = Path(output)
    _check_target(target)
    with open_existing(store_root(click.get_current_context(), store_dir)) as store:
        if run is not None:
            stream_id = resolve(store, run)
            [info] = [i for i in store.events.streams(stream_id) if i.stream_id == stream_id]
            status = run_status(store, overview(store.events, info))
            built = run_report(store, stream_id, redact=redact, status=status)
        else:
            assert experiment is not None
            built = _experiment(store, experiment)
    size = _write(target, built.html)
    if as_json:
        emit_json({"path": str(target), "bytes": size, "runs": built.runs})
        return
    runs = f"{built.runs} Run" + ("" if built.runs == 1 else "s")
    click.echo(f"wrote {target} ({size / 1e6:.1f} MB, {runs}); open it in a browser")


def _experiment(store: Store, experiment: str) -> Report:
    from evopolicygym.records.experiments import UnknownExperiment
    from evopolicygym.report import experiment_report

    try:
        return experiment_report(store, experiment)
    except UnknownExperiment as exc:
        raise CliError(f"{exc.args[0]} (see `{cli_command('experiment', 'list')}`)") from None
