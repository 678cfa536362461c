"""The ``evopolicy`` command group."""

from __future__ import annotations

import click

from evopolicygym.cli.benchmarks import benchmarks
from evopolicygym.cli.errors import Cli
from evopolicygym.cli.evaluate import evaluate
from evopolicygym.cli.query import query
from evopolicygym.cli.record import record

__all__ = ["main"]


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evopolicygym", prog_name="evopolicy")
def main() -> None:
    """EvoPolicyGym: evaluate policy programs on Benchmarks."""


main.add_command(benchmarks)
main.add_command(evaluate)
main.add_command(record)
main.add_command(query)
