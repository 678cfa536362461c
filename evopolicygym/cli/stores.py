"""Opening a store from the command line: which directory, that it exists, which Run.

``record`` and its subcommands (``checkout``, ``replay``) share these, so a missing
store or an unknown Run reads the same everywhere and names the command that helps.
"""

from __future__ import annotations

from pathlib import Path

import click

from evopolicygym.cli.errors import CliError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import given_store
from evopolicygym.cli.output import one_line
from evopolicygym.records.location import STORE_ENV, Store, StoreUrl, open_store, resolve_store
from evopolicygym.records.runs import AmbiguousRun, RunSummary, UnknownRun, resolve_run
from evopolicygym.records.store import StoreError
from evopolicygym.run.liveness import host_alive

__all__ = ["check_store_dir", "open_existing", "resolve", "run_status", "store_root"]


def store_root(ctx: click.Context, option: str | None = None) -> Path | StoreUrl:
    """The store: ``option`` (a command's own ``--store``), else the ``--store`` given on the
    command line (at the ``record`` group or after its subcommand), else ``$EVOPOLICY_STORE``
    or ``./evopolicy-store``; a directory, or a ``StoreUrl`` (``str`` masks its password)."""
    return resolve_store(option if option is not None else given_store(ctx))


def check_store_dir(path: str | Path | StoreUrl | None) -> None:
    """A store directory given as a path that names something else (a file) is a user error,
    found before anything is created or recorded. A URL is checked when it is opened."""
    root = resolve_store(path)
    if isinstance(root, StoreUrl):
        return
    if root.exists() and not root.is_dir():
        raise CliError(
            f"--store {path if path is not None else root}: {root} is not a directory "
            "(a store is one)"
        )


def open_existing(root: Path | StoreUrl, *, reader: bool = False) -> Store:
    """The store at ``root``, which must exist (reading never creates one); ``reader``: opened
    to read only (see ``open_store``)."""
    check_store_dir(root)
    if isinstance(root, Path) and not (root / "events.db").exists():
        raise CliError(
            f"no store at {root}: create one with `{cli_command('record', 'create')}` "
            f"(or point --store or {STORE_ENV} at an existing store)"
        )
    try:
        return open_store(root, reader=reader)
    except StoreError as exc:
        message = one_line(str(exc))
        if isinstance(root, StoreUrl) and message.startswith(("no event log", "no blob tables")):
            message += f": create one with `{cli_command('record', 'create')}`"
        raise CliError(message) from exc


def resolve(store: Store, run: str) -> str:
    """The stream of RUN, given as ``<id>``, ``run-<id>``, ``latest`` or a unique prefix of an
    id."""
    try:
        return resolve_run(store.events, run)
    except AmbiguousRun as exc:
        raise CliError(f"{exc} (see `{cli_command('record', 'list')}`)") from None
    except UnknownRun:
        raise CliError(
            f"no run {run!r} in the store at {store.location} "
            f"(see `{cli_command('record', 'list')}`)"
        ) from None


def run_status(store: Store, summary: RunSummary) -> str:
    """A Run's ``status`` in every command's output: ``empty``, ``running``, ``interrupted``
    or its terminal reason. A Run that says it is running while no Host holds it died
    without a word (say, SIGKILL): it reads ``interrupted``."""
    status = summary.status
    if status == "running" and not host_alive(store, summary.run_id):
        return "interrupted"
    return status
