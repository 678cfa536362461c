"""Options shared by commands: ``--store`` and ``--param``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["param_option", "store_option"]

F = TypeVar("F", bound=Callable[..., Any])


def _parse_params(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise click.BadParameter(f"{item!r} is not key=value", ctx, param)
        if key in params:
            raise click.BadParameter(f"{key!r} given twice", ctx, param)
        params[key] = value
    return params


def store_option(note: str = "") -> Callable[[F], F]:
    """``--store DIR`` (into ``store_dir``), the same on every command that opens a store."""
    from evopolicygym.records.location import STORE_ENV  # only commands with a store pay for it

    return click.option(
        "--store",
        "store_dir",
        metavar="DIR",
        default=None,
        help=f"Store directory [default: ${STORE_ENV}, else ./evopolicy-store]{note}.",
    )


def param_option(fn: F) -> F:
    """``--param key=value`` (repeatable), passed to the Benchmark factory as strings."""
    return click.option(
        "--param",
        "params",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_parse_params,
        help="Benchmark parameter (repeatable); the factory parses the value.",
    )(fn)
