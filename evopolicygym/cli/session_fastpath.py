"""What ``evopolicy session submit`` and ``finish`` do, on the standard library alone.

An Agent runs these once per Submission and waits for the process each time: loading
click and msgspec would cost it more than the socket exchange. So the plain command
lines::

    session submit [PROGRAM] --episodes SELECTOR [--parent ID] [--socket PATH]
    session finish ID... [--socket PATH]

are read here (``quick``) and never load either. Help, and anything this reader does
not take exactly as given, goes to the click commands in ``session.py``, which call the
same ``submit`` and ``finish`` and report errors as every command does.

Exit status: 0 with the result as JSON on stdout; 1 when the Host rejects the request,
with ``{"error": ...}`` as JSON on stderr; 2 for a client error (no session, a dropped
connection, bad arguments), as one ``error: ...`` line.
"""

from __future__ import annotations

import json
import os
import sys

from evopolicygym.program import submitted_files
from evopolicygym.protocol import (
    SESSION_ENV,
    WORKSPACE_ENV,
    SessionUnavailable,
    finish_request,
    request,
    submit_request,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["MAX_ID", "ClientError", "finish", "quick", "submit"]

MAX_ID = 2**63 - 1  # the largest Submission id the Host takes (a signed 64-bit integer)


class ClientError(Exception):
    """The request could not be made or answered: no session, no program, a dropped
    connection (exit status 2)."""


def submit(
    program: str | None, episodes: str, parent: int | None, socket_path: str | None
) -> tuple[int, str]:
    """Submit the program directory ``program`` (default: the workspace's ``program``) for
    evaluation on ``episodes``: the exit status and the JSON text to print (stdout for 0,
    stderr for 1). Raises ``ClientError``."""
    path = _socket(socket_path)
    if program is None:
        workspace = os.environ.get(WORKSPACE_ENV)
        if not workspace:
            raise ClientError(f"no PROGRAM given and ${WORKSPACE_ENV} is not set")
        program = os.path.join(workspace, "program")
    files, problem = submitted_files(program)  # a problem is recorded by the Host too
    body = submit_request(episodes, files, problem, parent)
    return _call(path, body)


def finish(ids: Sequence[int], socket_path: str | None) -> tuple[int, str]:
    """Finish the Run naming ``ids`` as final candidates, best first; as ``submit``."""
    path = _socket(socket_path)
    return _call(path, finish_request(ids))


def quick(argv: Sequence[str]) -> None:
    """Carry out ``evopolicy session ARGV...`` and end the process, when ARGV is a plain
    submit or finish command line; otherwise return having done nothing."""
    parsed = _parse(argv)
    if parsed is None:
        return
    command, options = parsed
    try:
        if command == "submit":
            status, text = submit(
                options.get("program"),
                options["--episodes"],
                options.get("--parent"),
                options.get("--socket"),
            )
        else:
            status, text = finish(options["ids"], options.get("--socket"))
    except ClientError as exc:
        status, text = 2, "error: " + " ".join(str(exc).split())
    except UnicodeEncodeError as exc:  # a path from the environment that is not UTF-8
        shown = exc.object.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        status, text = (
            2,
            "error: not valid UTF-8: '" + " ".join(shown.split()) + "' (give paths as UTF-8 text)",
        )
    except KeyboardInterrupt:
        status, text = 130, "interrupted"
    stream = sys.stdout if status == 0 else sys.stderr
    try:
        stream.write(text + "\n")
        stream.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        status = status or 1  # the reply did not reach the reader
    # Nothing is left to clean up (the connection is closed, the output flushed), and the
    # Agent waits for the exit: tearing the interpreter down would only add to its wait.
    os._exit(status)


# --------------------------------------------------------------------------- internals

# What `_parse` reads as each option's value; any other option (help included) is click's.
_SUBMIT_OPTIONS = ("--episodes", "--parent", "--socket")
_FINISH_OPTIONS = ("--socket",)


def _parse(argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """``(command, options)`` for a plain command line, None for anything else: an option
    this reader does not know, ``--name=value``, ``--``, a value missing, empty or out of
    range, a repeated option or argument, text that is not UTF-8."""
    if not argv or argv[0] not in ("submit", "finish"):
        return None
    command, rest = argv[0], argv[1:]
    known = _SUBMIT_OPTIONS if command == "submit" else _FINISH_OPTIONS
    options: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if not _utf8(arg):
            return None
        if arg.startswith("-"):
            if arg not in known or arg in options or i + 1 == len(rest):
                return None
            value = rest[i + 1]
            if not value or value.startswith("-") or not _utf8(value):
                return None
            options[arg] = value
            i += 2
        else:
            positional.append(arg)
            i += 1
    if command == "submit":
        if "--episodes" not in options or len(positional) > 1:
            return None
        if "--parent" in options:
            parent = _id(options["--parent"])
            if parent is None:
                return None
            options["--parent"] = parent
        if positional:
            options["program"] = positional[0]
        return command, options
    ids = [_id(arg) for arg in positional]
    if not ids or None in ids:
        return None
    options["ids"] = ids
    return command, options


def _id(text: str) -> int | None:
    """A Submission id written as plain decimal digits, within range; else None."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if value <= MAX_ID else None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 reach Python as lone surrogates
        return False
    return True


def _socket(option: str | None) -> str:
    path = option or os.environ.get(SESSION_ENV)
    if not path:
        raise ClientError(f"no session: ${SESSION_ENV} is not set (or pass --socket)")
    return path


def _call(path: str, body: dict[str, Any]) -> tuple[int, str]:
    try:
        reply = request(path, body)
    except SessionUnavailable as exc:
        raise ClientError(str(exc)) from exc
    if reply["ok"]:
        return 0, _json(reply["result"])
    error = reply["error"]
    return 1, _json({"error": {"code": error["code"], "message": error["message"]}})


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
