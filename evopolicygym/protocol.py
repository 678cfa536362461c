"""The Agent-Host session protocol: what both sides of ``evopolicy session`` agree on.

- The environment an Agent is started with: ``EVOPOLICY_SESSION`` (the socket),
  ``EVOPOLICY_WORKSPACE`` and ``EVOPOLICY_CLI`` (how to call ``evopolicy``).
- The Episode selector grammar of ``submit --episodes``: ``3`` (one index),
  ``0:4`` (half-open range), ``0:2,4:8`` (comma-separated parts, strictly
  increasing and non-overlapping).
- The wire: one frame each way per connection, a 4-byte big-endian length and a
  UTF-8 JSON body. The requests::

      {"op": "submit", "request_id": str, "episodes": selector,
       "files": {path: base64 of the bytes} | null, "problem": str | null,
       "parent": int | null}
      {"op": "finish", "request_id": str, "candidates": [int, ...]}

  (``problem`` instead of ``files`` when the client could not capture the program);
  the reply, ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code",
  "message"}}``; and the client, ``request``. The Host checks each request against
  these shapes (``run.session_server``) before anything reads it.

A leaf that imports only the standard library, and little of it: an Agent calls
``evopolicy session submit`` for every Submission and waits for its start-up each time.
JSON because any language speaks it, and ``json`` ships with Python where msgpack does not.
"""

from __future__ import annotations

import binascii
import json
import os
import re
import socket
import struct
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = [
    "CLI_ENV",
    "CLI_SHIM",
    "MAX_FRAME_BYTES",
    "MAX_SELECTOR_CHARS",
    "READ_TIMEOUT_S",
    "SESSION_ENV",
    "WORKSPACE_ENV",
    "FrameError",
    "SelectorError",
    "SessionUnavailable",
    "cli_shim",
    "encode",
    "error_reply",
    "finish_request",
    "format_selector",
    "parse_selector",
    "recv_frame",
    "request",
    "send_frame",
    "submit_request",
    "well_formed",
]

SESSION_ENV = "EVOPOLICY_SESSION"
WORKSPACE_ENV = "EVOPOLICY_WORKSPACE"
CLI_ENV = "EVOPOLICY_CLI"  # a JSON list: the command line that runs `evopolicy`
# An executable in the workspace root that runs the same command line: the Agent's way to
# the session whatever shell it uses (a login shell may reset PATH and lose `evopolicy`).
CLI_SHIM = "evopolicy"


def cli_shim(cli: Sequence[str]) -> bytes:
    """The text of the workspace's ``./evopolicy``: ``cli`` with the arguments appended."""
    import shlex  # the Host's side only

    return (
        "#!/bin/sh\n# The session commands of this Run (see TASK.md).\n"
        f'exec {shlex.join(cli)} "$@"\n'
    ).encode()


# --------------------------------------------------------------------------- selectors

_PART = re.compile(r"(\d{1,9})(?::(\d{1,9}))?", re.ASCII)  # ASCII digits only
MAX_SELECTOR_CHARS = 1000


class SelectorError(ValueError):
    """A selector that does not follow the grammar; the message says where."""


def parse_selector(text: str) -> list[int]:
    """The pool indices ``text`` names, in increasing order. Pure: the Host checks the
    indices against the pool and the limits."""
    if len(text) > MAX_SELECTOR_CHARS:
        raise SelectorError(f"selector is longer than {MAX_SELECTOR_CHARS} characters")
    if not text.strip():
        raise SelectorError("empty selector: use an index (3), a range (0:4) or ranges (0:2,4:8)")
    indices: list[int] = []
    for part in text.split(","):
        match = _PART.fullmatch(part.strip())
        if match is None:
            raise SelectorError(
                f"bad selector part {part.strip()!r}: use an index (3) or a half-open range (0:4)"
            )
        start = int(match.group(1))
        stop = start + 1 if match.group(2) is None else int(match.group(2))
        if stop <= start:
            raise SelectorError(f"empty range {part.strip()!r}: the end must exceed the start")
        if indices and start <= indices[-1]:
            raise SelectorError(
                f"selector parts must be strictly increasing and not overlap ({part.strip()!r})"
            )
        if stop - start > 1_000_000 or len(indices) + stop - start > 1_000_000:
            raise SelectorError("selector names more than 1,000,000 Episodes")
        indices.extend(range(start, stop))
    return indices


def format_selector(indices: Sequence[int]) -> str:
    """The shortest selector naming ``indices`` (sorted, distinct; consecutive runs as ranges)."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}:{ordered[j] + 1}")
        i = j + 1
    return ",".join(parts)


# --------------------------------------------------------------------------- requests

# A program may be 64 MiB, base64 in the request (86 MiB); the rest is headroom for the
# other fields and the JSON around them.
MAX_FRAME_BYTES = 96 * 1024 * 1024
# A request can take minutes to handle, but only this long to arrive.
READ_TIMEOUT_S = 30.0
_HEADER = struct.Struct(">I")


def _base64(value: object) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(value, newline=False).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(value: Any) -> bytes:
    """A request or reply body: compact UTF-8 JSON, bytes as base64 strings."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_base64).encode()


def _request_id() -> str:
    """A fresh request id: 32 random hex digits (``uuid`` would cost the Agent its import)."""
    return os.urandom(16).hex()


def submit_request(
    episodes: str, files: dict[str, bytes] | None, problem: str | None, parent: int | None
) -> dict[str, Any]:
    """A submit request, as the module docstring shapes it, with a fresh request id."""
    return {
        "op": "submit",
        "request_id": _request_id(),
        "episodes": episodes,
        "files": files,
        "problem": problem,
        "parent": parent,
    }


def finish_request(candidates: Sequence[int]) -> dict[str, Any]:
    """A finish request naming ``candidates``, best first, with a fresh request id."""
    return {"op": "finish", "request_id": _request_id(), "candidates": list(candidates)}


def error_reply(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def well_formed(reply: Any) -> bool:
    """Whether ``reply`` has the reply shape (the client refuses anything else)."""
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        return False
    if reply["ok"]:
        return "result" in reply
    error = reply.get("error")
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), str)
        and isinstance(error.get("message"), str)
    )


# --------------------------------------------------------------------------- frames


class FrameError(Exception):
    """A frame that is truncated or longer than the limit."""


class SessionUnavailable(Exception):
    """The client could not get a reply: no socket, a refused or dropped connection, a bad reply."""


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(remaining)
        count = sock.recv_into(view[got:])
        if count == 0:
            raise FrameError(f"frame truncated after {got} of {n} bytes")
        got += count
    return buf  # not copied: a frame may be 80 MiB


def recv_frame(sock: socket.socket, deadline: float | None) -> bytearray:
    """One frame's body; ``deadline`` (monotonic seconds) bounds the wait, None waits."""
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
    if length > MAX_FRAME_BYTES:
        # Refused unread: a declared length must not make us allocate or wait for it.
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return _recv_exact(sock, length, deadline)


def send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_HEADER.pack(len(body)))
    sock.sendall(body)


# --------------------------------------------------------------------------- the client


def request(path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Send one request to the Session at ``path`` and return its reply.

    ``timeout`` bounds the whole exchange; the default waits as long as the Host takes.
    """
    encoded = encode(body)
    deadline = None if timeout is None else time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            raise SessionUnavailable(
                f"cannot connect to the session at {path}: {exc.strerror or exc}"
            ) from exc
        try:  # noqa: SIM105 (contextlib is one more import for the Agent's every call)
            send_frame(sock, encoded)
        except OSError:
            pass  # not final: the Host may have refused early and left a reply
        try:
            raw = recv_frame(sock, deadline)
        except (FrameError, OSError) as exc:
            raise SessionUnavailable(f"the session connection dropped: {exc}") from exc
    try:
        reply = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise SessionUnavailable(f"the session sent a malformed reply: {exc}") from exc
    if not well_formed(reply):
        raise SessionUnavailable("the session sent a malformed reply")
    result: dict[str, Any] = reply
    return result
