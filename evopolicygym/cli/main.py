"""The ``evopolicy`` command group.

Subcommands are imported when used: ``evopolicy evaluate`` should not pay for
the record store's SQLAlchemy and DuckDB imports, nor ``query`` for Gymnasium.
"""

from __future__ import annotations

import importlib

import click

from evopolicygym.cli.errors import Cli

__all__ = ["main"]

_COMMANDS = {
    "agents": "evopolicygym.cli.agents:agents",
    "benchmarks": "evopolicygym.cli.benchmarks:benchmarks",
    "evaluate": "evopolicygym.cli.evaluate:evaluate",
    "export": "evopolicygym.cli.export:export_command",
    "query": "evopolicygym.cli.query:query",
    "quickstart": "evopolicygym.cli.quickstart:quickstart",
    "record": "evopolicygym.cli.record:record",
    "resume": "evopolicygym.cli.run:resume",
    "run": "evopolicygym.cli.run:run",
    "session": "evopolicygym.cli.session:session",
}


class _LazyCli(Cli):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command


@click.group(cls=_LazyCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evopolicygym", prog_name="evopolicy")
def main() -> None:
    """EvoPolicyGym: coding agents evolve policy programs under an Episode budget; every Run
    is recorded, replayable, queryable and exportable as Hugging Face datasets."""
