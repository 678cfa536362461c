"""Options shared by commands: ``--store`` (and the group that passes it on) and ``--param``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from evopolicygym.cli.errors import Cli, CliError

__all__ = [
    "RECORD_STORE_NOTE",
    "STORE_META",
    "StoreGroup",
    "given_store",
    "param_option",
    "store_option",
]

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


STORE_META = "evopolicygym.cli.store"  # ctx.meta key: the --store given on the command line
RECORD_STORE_NOTE = (
    "; also accepted before the subcommand (`record --store DIR ...`); "
    "given at both, this one is used"
)


def given_store(ctx: click.Context | None = None) -> str | None:
    """The ``--store`` given on this command line (at a group or at its subcommand), if any:
    what hints repeat, so a pasted command names the same store."""
    ctx = ctx if ctx is not None else click.get_current_context(silent=True)
    value = ctx.meta.get(STORE_META) if ctx is not None else None
    return value if isinstance(value, str) and value else None


def _remember_store(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Keep the ``--store`` in ``ctx.meta``, which a group's and its subcommand's contexts share,
    so the ``record`` group's and a subcommand's are one setting. A group's options are parsed
    before its subcommand's: given at both, the subcommand's (the later, nearer one) is used.
    A path naming a file is refused here, before a command creates, records or suggests anything
    (`resume`, say, would suggest creating a store there)."""
    if value and "://" not in value and os.path.exists(value) and not os.path.isdir(value):
        raise CliError(f"--store {value}: {value} is not a directory (a store is one)")
    if value == "":  # read as not given, it would be the default store
        raise click.BadParameter(
            "must not be empty (leave it out for the default store)", ctx, param
        )
    if value is not None:
        ctx.meta[STORE_META] = value
    return value


def store_option(note: str = "", *, expose_value: bool = True) -> Callable[[F], F]:
    """``--store DIR|URL`` (into ``store_dir``), the same on every command that opens a store.

    The value is also kept for :func:`given_store` (``stores.store_root`` and hints read it),
    so a command that does not take it as an argument (``expose_value=False``) still has it."""
    from evopolicygym.records.location import STORE_ENV  # only commands with a store pay for it

    return click.option(
        "--store",
        "store_dir",
        metavar="DIR",
        default=None,
        expose_value=expose_value,
        callback=_remember_store,
        help=f"Store directory, or a postgresql:// URL shared by many machines "
        f"[default: ${STORE_ENV}, else ./evopolicy-store]{note}.",
    )


class StoreGroup(Cli):
    """A group with a ``--store`` of its own that each subcommand opening a store also accepts
    (``record --store X list`` is ``record list --store X``); ``storeless`` names the
    subcommands that open none (they are left without it)."""

    def __init__(self, *args: Any, storeless: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storeless = frozenset(storeless)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if (name or cmd.name) not in self.storeless and not any(
            p.name == "store_dir" for p in cmd.params
        ):
            store_option(RECORD_STORE_NOTE, expose_value=False)(cmd)
        super().add_command(cmd, name)


def not_empty(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """An option callback refusing an empty string (``--program ""``), which a command would
    otherwise read as the option not given."""
    values = value if isinstance(value, tuple) else (value,)
    if "" in values:
        raise click.BadParameter("must not be empty", ctx, param)
    return value


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """An option callback refusing NaN, which passes click's FloatRange (every comparison
    with it is false)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number", ctx, param)
    return value


def param_option(fn: F) -> F:
    """``--param key=value`` (repeatable), passed to the Benchmark factory as strings."""
    return click.option(
        "--param",
        "params",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_parse_params,
        help="Benchmark parameter (repeatable). gymnasium:<id> reads true, 3 or 0.5 as JSON and "
        "checks each value against the type the environment's constructor gives it.",
    )(fn)
