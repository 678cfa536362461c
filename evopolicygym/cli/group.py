"""The ``evopolicy`` command group.

Subcommands are imported when used: ``evopolicy evaluate`` should not pay for
the record store's SQLAlchemy and DuckDB imports, nor ``query`` for Gymnasium.
Listing them (``evopolicy --help``, shell completion) imports none of them: each
one's short help is kept in the table below, and a test holds it equal to the
command's own.
"""

from __future__ import annotations

import importlib
from gettext import gettext as _
from typing import TYPE_CHECKING, NamedTuple

import click

from evopolicygym.cli.errors import Cli

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

__all__ = ["main"]


class _Entry(NamedTuple):
    """Where a command lives and how ``evopolicy --help`` lists it."""

    target: str  # "module:attribute" of the click command
    summary: str  # its short help (or, if from_docstring, its help text's first line)
    from_docstring: bool = False  # no explicit short_help: click shortens the help text


_COMMANDS = {
    "agents": _Entry("evopolicygym.cli.agents:agents", "The Agent providers."),
    "benchmarks": _Entry(
        "evopolicygym.cli.benchmarks:benchmarks",
        "Inspect the Benchmarks: every family's, installed or not.",
        from_docstring=True,
    ),
    "evaluate": _Entry(
        "evopolicygym.cli.evaluate:evaluate", "Evaluate a policy program on a Benchmark."
    ),
    "experiment": _Entry(
        "evopolicygym.cli.experiment:experiment",
        "Run and summarize matrices of Runs (agents x Benchmarks x seeds).",
    ),
    "export": _Entry(
        "evopolicygym.cli.export:export_command", "Export recorded Runs as a Hugging Face dataset."
    ),
    "query": _Entry("evopolicygym.cli.query:query", "Run SQL over the store's read models."),
    "quickstart": _Entry(
        "evopolicygym.cli.quickstart:quickstart",
        "Offline end-to-end demo: evolve, validate, assess, replay.",
    ),
    "record": _Entry("evopolicygym.cli.record:record", "Inspect and verify the event store."),
    "report": _Entry(
        "evopolicygym.cli.report:report",
        "Write one self-contained HTML report of a Run or an experiment.",
    ),
    "resume": _Entry("evopolicygym.cli.run:resume", "Carry on a Run whose Host stopped."),
    "run": _Entry(
        "evopolicygym.cli.run:run", "Run an Agent on a Benchmark under an Episode budget."
    ),
    "serve-env": _Entry(
        "evopolicygym.cli.serve_env:serve_env",
        "Serve the training environment over OpenEnv.",
    ),
    "session": _Entry(
        "evopolicygym.cli.session:session", "Submit programs to the Run and finish it (Agent side)."
    ),
    "view": _Entry("evopolicygym.cli.view:view", "Browse a store in a live local web viewer."),
}


def _summary(name: str, entry: _Entry) -> click.Command:
    """A stand-in that lists like the real command, without importing its module."""
    if entry.from_docstring:
        return click.Command(name, help=entry.summary)
    return click.Command(name, short_help=entry.summary)


class _LazyCli(Cli):
    """``Cli`` (one-line errors, exit codes) whose table commands load on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        module, _sep, attr = entry.target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def _listed(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command as listings show it: the stand-in for a table command."""
        entry = _COMMANDS.get(name)
        return super().get_command(ctx, name) if entry is None else _summary(name, entry)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click.Group.format_commands, with each command as _listed gives it.
        commands = [
            (name, cmd)
            for name in self.list_commands(ctx)
            if (cmd := self._listed(ctx, name)) is not None and not cmd.hidden
        ]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _cmd in commands)
        rows = [(name, cmd.get_short_help_str(limit)) for name, cmd in commands]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        # click.Group.shell_complete, with each command as _listed gives it.
        from click.shell_completion import CompletionItem

        results = [
            CompletionItem(name, help=cmd.get_short_help_str())
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
            and (cmd := self._listed(ctx, name)) is not None
            and not cmd.hidden
        ]
        results.extend(click.Command.shell_complete(self, ctx, incomplete))
        return results


@click.group(cls=_LazyCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evopolicygym", prog_name="evopolicy")
def main() -> None:
    """EvoPolicyGym: coding agents evolve policy programs under an Episode budget; every Run
    is recorded, replayable, queryable and exportable as Hugging Face datasets."""
