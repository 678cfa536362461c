"""User errors on the command line: one ``error: ...`` line on stderr, exit status 2 for
usage errors and 1 otherwise. ``Cli`` translates the known exception types once, so
commands just raise.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from evopolicygym.cli.output import one_line

__all__ = ["Cli", "CliError", "CliUsageError", "name_options"]

# click >= 8.2 raises this to print a group's help when it gets no arguments; it is help, not
# an error.
_HELP_REQUESTS: tuple[type[BaseException], ...] = tuple(
    c for c in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if c is not None
)


class CliError(click.ClickException):
    """A user error, shown as one ``error: ...`` line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


class CliUsageError(CliError):
    exit_code = 2


def name_options(message: str, names: tuple[tuple[str, str], ...]) -> str:
    """``message`` from a layer below the CLI (a config's validation) with its words for each
    setting replaced by the option a user gives (``names``: (words, option) pairs, longest
    words first where one holds another)."""
    for words, option in names:
        message = message.replace(words, option)
    return message


_PASS_THROUGH: tuple[type[BaseException], ...] = (CliError, *_HELP_REQUESTS)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except _PASS_THROUGH:
        raise
    except KeyboardInterrupt:
        # Ctrl-C before a command has set up its own stop (imports, parsing, opening a store):
        # the same line and status as after, not click's "Aborted!" and status 1.
        click.echo("interrupted", err=True)
        raise click.exceptions.Exit(130) from None
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        raise CliUsageError(exc.format_message() + hint) from exc
    except click.ClickException as exc:
        error = CliUsageError if exc.exit_code == 2 else CliError
        raise error(exc.format_message()) from exc
    except UnicodeEncodeError as exc:
        # An argument of bytes that are not UTF-8 reaches Python as lone surrogates, which a
        # store, a socket or JSON cannot take: the user's input, not a bug.
        if "surrogates not allowed" not in exc.reason:
            raise
        shown = exc.object.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise CliUsageError(
            f"not valid UTF-8: '{one_line(shown)}' (give arguments as UTF-8 text)"
        ) from exc
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
