"""``evopolicy session``: the Agent's side of the Session (``submit`` and ``finish``).

The work is ``session_fastpath``'s, which also reads the plain command lines without click;
these commands give the help texts and the usage errors, and serve in-process callers.

Exit status: 0 with the result as JSON on stdout; 1 when the Host rejects the request,
with ``{"error": ...}`` as JSON on stderr; 2 for a client error (no session, a dropped
connection, bad arguments), as one ``error: ...`` line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from evopolicygym.cli import session_fastpath
from evopolicygym.cli.errors import Cli, CliUsageError
from evopolicygym.cli.options import not_empty
from evopolicygym.protocol import SESSION_ENV

__all__ = ["session"]

_MAX_ID = session_fastpath.MAX_ID


def _socket_option(fn: Any) -> Any:
    return click.option(
        "--socket",
        "socket_path",
        metavar="PATH",
        default=None,
        callback=not_empty,
        help=f"Session socket [default: ${SESSION_ENV}].",
    )(fn)


@click.group(cls=Cli, short_help="Submit programs to the Run and finish it (Agent side).")
def session() -> None:
    """Talk to the Run's Session: the Agent's only door to the Environment."""


@session.command()
@click.argument("program", required=False, metavar="[PROGRAM]")
@click.option(
    "--episodes",
    required=True,
    metavar="SELECTOR",
    help="Which Episodes of the Run's pool to evaluate on (see above).",
)
@click.option(
    "--parent",
    type=click.IntRange(min=0, max=_MAX_ID),
    default=None,
    metavar="ID",
    help="The Submission this program was edited from (0: the initial program); "
    "its edit is measured against that one [default: not said].",
)
@_socket_option
def submit(program: str | None, episodes: str, parent: int | None, socket_path: str | None) -> None:
    """Submit PROGRAM (a directory with a policy.py) for evaluation.

    PROGRAM defaults to $EVOPOLICY_WORKSPACE/program.

    --episodes SELECTOR picks Episodes by index in the Run's Episode pool:

    \b
      3          one Episode, index 3
      0:4        a half-open range: 0, 1, 2 and 3
      0:2,4:8    comma-separated parts, strictly increasing, non-overlapping

    Each Episode evaluated costs budget. Reusing an index gives a matched
    comparison with earlier Submissions on it, and costs budget again.
    """
    _done(lambda: session_fastpath.submit(program, episodes, parent, socket_path))


@session.command()
@click.argument("ids", nargs=-1, required=True, type=int, metavar="ID...")
@_socket_option
def finish(ids: tuple[int, ...], socket_path: str | None) -> None:
    """Finish the Run, naming final candidates by Submission ID, best first."""
    for i in ids:
        if not 0 <= i <= _MAX_ID:
            raise CliUsageError(f"{i} is not a Submission id")
    _done(lambda: session_fastpath.finish(ids, socket_path))


def _done(call: Callable[[], tuple[int, str]]) -> None:
    try:
        status, text = call()
    except session_fastpath.ClientError as exc:
        raise CliUsageError(str(exc)) from exc
    click.echo(text, err=status != 0)
    _exit_now(status)
    if status:
        raise click.exceptions.Exit(status)


def _exit_now(status: int) -> None:
    """End the process with ``status`` as soon as the reply is out, when this process is the
    ``evopolicy`` command itself: the Agent waits for the exit, and tearing the interpreter
    down (click, msgspec, typing) costs it more than the socket exchange. Nothing is left to
    clean up: the connection is closed and the reply flushed. Called in-process (a test's
    runner, another program), or when the output cannot be flushed, it returns and the
    command ends as any other."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    own = (spec is not None and spec.name == "evopolicygym.cli.__main__") or (
        spec is None and os.path.basename(sys.argv[0]) == "evopolicy"
    )
    if not own or sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__:
        return
    out, err = sys.stdout, sys.stderr
    if out is None or err is None:
        return
    try:
        out.flush()
        err.flush()
    except (OSError, ValueError):
        return  # the usual exit reports it
    os._exit(status)
