"""Shared CLI plumbing: one-line errors, ``--param`` parsing, Benchmark loading, JSON output.

Every user error reaches the terminal as a single ``error: ...`` line on
stderr, exit status 2 for usage errors and 1 otherwise. ``Cli`` translates the
known exception types once, so commands just raise.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

if TYPE_CHECKING:
    from evopolicygym.benchmark import Benchmark
    from evopolicygym.evaluation import PlannedEpisode

__all__ = [
    "FAMILIES",
    "Cli",
    "CliError",
    "CliUsageError",
    "emit_json",
    "load",
    "one_line",
    "param_option",
    "plan",
    "store_option",
]

# Families take an argument after a colon, so there is no single Benchmark to build and describe.
FAMILIES = {
    "gymnasium": (
        "Any Gymnasium environment: use gymnasium:<EnvId> (e.g. gymnasium:CartPole-v1); "
        "--param key=value is passed to gymnasium.make"
    ),
}

F = TypeVar("F", bound=Callable[..., Any])

# click >= 8.2 raises this to print a group's help when it gets no arguments; it is help, not an error.
_HELP_REQUESTS: tuple[type[BaseException], ...] = tuple(
    c for c in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if c is not None
)


def one_line(text: str) -> str:
    return " ".join(text.split())


# C0 controls (but tab and newline), DEL and C1, as \xNN: a terminal would act on them.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}
# The same with tab and newline too: a table cell is one line.
_CONTROL_IN_CELL = {**_CONTROL, 0x09: "\\x09", 0x0A: "\\x0a"}


def printable(text: str, *, cell: bool = False) -> str:
    """``text`` with terminal control characters escaped: recorded strings (a policy's
    output, an error message) are untrusted and must not drive the user's terminal."""
    return text.translate(_CONTROL_IN_CELL if cell else _CONTROL)


class CliError(click.ClickException):
    """A user error, shown as one ``error: ...`` line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


class CliUsageError(CliError):
    exit_code = 2


_PASS_THROUGH: tuple[type[BaseException], ...] = (CliError, *_HELP_REQUESTS)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except _PASS_THROUGH:
        raise
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        raise CliUsageError(exc.format_message() + hint) from exc
    except click.ClickException as exc:
        error = CliUsageError if exc.exit_code == 2 else CliError
        raise error(exc.format_message()) from exc
    except Exception as exc:
        kind = _known(exc)
        if kind is None:
            raise
        raise CliError(f"{kind}{exc}" if str(exc) else type(exc).__name__) from exc


# Known error types by module, looked up only among modules already imported (the one that
# raised is), so a light command such as `session submit` never imports numpy to report one.
_KNOWN = {
    "evopolicygym.evaluation.config": ("EvaluationError", "evaluation failed: "),
    "evopolicygym.program": ("ProgramError", ""),
    "evopolicygym.registry": ("UnknownBenchmark", ""),
    "evopolicygym.benchmark": ("BenchmarkError", ""),
    "evopolicygym.records.store": ("StoreError", ""),
}


def _known(exc: Exception) -> str | None:
    """The message prefix for a known user-facing error, or None for anything else."""
    for module_name, (class_name, prefix) in _KNOWN.items():
        module = sys.modules.get(module_name)
        kind = getattr(module, class_name, None) if module is not None else None
        if kind is not None and isinstance(exc, kind):
            return prefix
    return None


class Cli(click.Group):
    """A group whose parsing and commands report known errors as one line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _translated():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _translated():
            return super().invoke(ctx)


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


def load(ref: str, params: Mapping[str, str]) -> Benchmark:
    """The Benchmark ``ref``; a factory rejecting its parameters is a user error."""
    from evopolicygym.registry import load_benchmark

    if ref in FAMILIES:
        raise CliError(f"{ref} is a family of Benchmarks: use {ref}:<id>")
    try:
        return load_benchmark(ref, params)
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def plan(benchmark: Benchmark, split: str, seed: int, count: int) -> list[PlannedEpisode]:
    from evopolicygym.evaluation import plan_episodes

    try:
        return plan_episodes(benchmark, split, seed, count)
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def emit_json(value: Any) -> None:
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())
