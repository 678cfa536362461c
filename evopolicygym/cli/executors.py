"""``--executor local|ray`` and ``--ray-address``: where a command plays its Episodes.

A placement, never a condition of the Run: nothing of it is recorded, and both executors
give the same results. Ray is imported only when ``--executor ray`` is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evopolicygym.cli.errors import CliError, CliUsageError

if TYPE_CHECKING:
    from evopolicygym.evaluation import Evaluator

__all__ = ["check_executor", "executor_options", "open_evaluator"]

F = TypeVar("F", bound=Callable[..., Any])


def executor_options(function: F) -> F:
    """``--executor`` (into ``executor``) and ``--ray-address`` (into ``ray_address``)."""
    function = click.option(
        "--ray-address",
        metavar="ADDR",
        default=None,
        help="Ray cluster to play Episodes on with --executor ray (host:port of its head) "
        "[default: $RAY_ADDRESS, else the cluster `ray start` runs on this "
        "machine, else a new local one].",
    )(function)
    return click.option(
        "--executor",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="Where Episodes are played: local (processes on this machine) or ray (Ray workers "
        "on any node of a cluster, each as contained as here; needs the ray extra). A "
        "placement only: the results and the record are the same.",
    )(function)


def check_executor(executor: str, ray_address: str | None) -> None:
    """Refuse options that do not go together, before anything slow is started."""
    if ray_address is not None and executor != "ray":
        raise CliUsageError("--ray-address is only for --executor ray")
    if ray_address == "":
        raise CliUsageError("--ray-address must not be empty (leave it out for the default)")


@contextlib.contextmanager
def open_evaluator(executor: str, ray_address: str | None) -> Iterator[Evaluator]:
    """The Evaluator ``executor`` names, closed afterwards; one-line errors where Ray is not
    installed or its cluster cannot be reached (before anything runs or is recorded)."""
    check_executor(executor, ray_address)
    from evopolicygym.evaluation import EvaluationError, make_evaluator

    try:
        evaluator = make_evaluator(executor, address=ray_address)
    except EvaluationError as exc:
        raise CliError(f"--executor {executor}: {exc}") from exc
    with evaluator:
        yield evaluator
