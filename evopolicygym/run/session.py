"""The Session transport: the Agent's requests to the Host over a private Unix socket.

One frame each way per connection: a 4-byte big-endian length, then a msgpack body.
The server validates the shape of each request and hands it to the Host's handler,
one request at a time; what the request *means* (budget, selectors, candidates) is
the handler's business, not this module's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from evopolicygym.hostdirs import private_dir
from evopolicygym.program import MAX_FILES

__all__ = [
    "MAX_FRAME_BYTES",
    "READ_TIMEOUT_S",
    "SESSION_ENV",
    "WORKSPACE_ENV",
    "Handler",
    "SessionServer",
    "SessionUnavailable",
    "error_reply",
    "request",
]

SESSION_ENV = "EVOPOLICY_SESSION"
WORKSPACE_ENV = "EVOPOLICY_WORKSPACE"
# A program may be 64 MiB; the rest is headroom for msgpack framing and the other fields.
MAX_FRAME_BYTES = 80 * 1024 * 1024
# A request can take minutes to handle, but only this long to arrive.
READ_TIMEOUT_S = 30.0
SOCKET_NAME = "session.sock"
_UNIX_PATH_MAX = 107  # sun_path is 108 bytes, one of them the terminating NUL
_HEADER = struct.Struct(">I")

Handler = Callable[[dict[str, Any]], dict[str, Any]]

log = logging.getLogger(__name__)

RequestId = Annotated[str, Meta(min_length=1, max_length=200)]


class _Submit(Struct, tag="submit", tag_field="op", forbid_unknown_fields=True):
    request_id: RequestId
    episodes: Annotated[str, Meta(max_length=1000)]
    files: Annotated[dict[str, bytes], Meta(max_length=MAX_FILES)] | None
    problem: str | None

    def __post_init__(self) -> None:
        # msgspec turns this into a ValidationError, so it reads like the other shape errors.
        if (self.files is None) == (self.problem is None):
            raise ValueError("exactly one of `files` and `problem` must be given")


class _Finish(Struct, tag="finish", tag_field="op", forbid_unknown_fields=True):
    request_id: RequestId
    candidates: Annotated[list[int], Meta(max_length=1000)]


_REQUEST = msgspec.msgpack.Decoder(_Submit | _Finish)
_ENCODER = msgspec.msgpack.Encoder()


class SessionUnavailable(Exception):
    """The client could not get a reply: no socket, a refused or dropped connection, a bad reply."""


class _BadFrame(Exception):
    pass


def error_reply(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


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
            raise _BadFrame(f"frame truncated after {got} of {n} bytes")
        got += count
    return buf  # not copied: a frame may be 80 MiB


def _recv_frame(sock: socket.socket, deadline: float | None) -> bytearray:
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline))
    if length > MAX_FRAME_BYTES:
        # Refused unread: a declared length must not make us allocate or wait for it.
        raise _BadFrame(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return _recv_exact(sock, length, deadline)


def _send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_HEADER.pack(len(body)))
    sock.sendall(body)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class SessionServer:
    """Serves Session requests on ``<private dir>/session.sock``, one at a time, in a thread.

    ``directory`` is where the private (0700) directory is made; the default is the
    system temp dir, which keeps the socket path under the AF_UNIX length limit.
    ``close()`` waits for a request being handled to finish.
    """

    def __init__(
        self,
        handler: Handler,
        directory: str | None = None,
        *,
        read_timeout: float = READ_TIMEOUT_S,
    ) -> None:
        self._handler = handler
        self._read_timeout = read_timeout
        self._dir = private_dir("evopolicy-session-", directory)
        self.path = os.path.join(self._dir, SOCKET_NAME)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if len(os.fsencode(self.path)) > _UNIX_PATH_MAX:
                raise ValueError(f"{self.path}: longer than the AF_UNIX limit of 107 bytes")
            # umask closes the window between bind and chmod; chmod covers odd filesystems.
            old_umask = os.umask(0o177)
            try:
                self._listener.bind(self.path)
            finally:
                os.umask(old_umask)
            os.chmod(self.path, 0o600)
            self._listener.listen()
        except BaseException:
            self._listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._wake_r, self._wake_w = os.pipe()
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> SessionServer:
        if self._thread is not None or self._closed:
            raise RuntimeError("a SessionServer can be started once")
        self._thread = threading.Thread(target=self._serve, name="evopolicy-session", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._conn is not None:
                # Unblocks a stuck read or write; a running handler still runs to its end.
                with contextlib.suppress(OSError):
                    self._conn.shutdown(socket.SHUT_RDWR)
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join()
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SessionServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            readable, _, _ = select.select([self._listener.fileno(), self._wake_r], [], [])
            if self._wake_r in readable:
                return
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conn = conn
            try:
                self._serve_connection(conn)
            except Exception:
                # Nothing a client does may stop the server.
                log.exception("session connection failed")
            finally:
                with self._lock:
                    self._conn = None
                conn.close()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            body = _recv_frame(conn, time.monotonic() + self._read_timeout)
        except _BadFrame as exc:
            reply = self._malformed(str(exc))
        except OSError:
            return  # the client is stuck or gone: nobody to reply to
        else:
            reply = self._reply(body)
        try:
            encoded = _ENCODER.encode(reply)
        except Exception as exc:
            log.error("session handler returned an unencodable reply: %s", exc)
            encoded = _ENCODER.encode(error_reply("internal_error", "unencodable reply"))
        conn.settimeout(self._read_timeout)
        with contextlib.suppress(OSError):
            _send_frame(conn, encoded)

    def _reply(self, body: bytearray) -> dict[str, Any]:
        try:
            parsed = _REQUEST.decode(body)
        except msgspec.DecodeError as exc:
            return self._malformed(str(exc))
        op = "submit" if isinstance(parsed, _Submit) else "finish"
        try:
            reply = self._handler({"op": op, **msgspec.structs.asdict(parsed)})
        except Exception:
            log.exception("session handler failed on %s", op)
            # The detail (paths, Host state) stays in the Host's log, not with the Agent.
            return error_reply("internal_error", "the Host failed to handle the request; see its log")
        if not _well_formed(reply):
            log.error("session handler returned a malformed reply: %.200r", reply)
            return error_reply("internal_error", "malformed reply")
        return reply


    def _malformed(self, message: str) -> dict[str, Any]:
        """A request the typed shapes refuse: the handler may record it (op ``malformed``);
        the Agent gets invalid_request either way, and the handler is never given its body."""
        fallback = error_reply("invalid_request", message)
        try:
            reply = self._handler({"op": "malformed", "message": message[:500]})
        except Exception:
            log.exception("session handler failed on a malformed request")
            return fallback
        return reply if _well_formed(reply) and reply["ok"] is False else fallback


def request(path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Send one request to the Session at ``path`` and return its reply.

    ``timeout`` bounds the whole exchange; the default waits as long as the Host takes.
    """
    encoded = _ENCODER.encode(body)
    deadline = None if timeout is None else time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            raise SessionUnavailable(
                f"cannot connect to the session at {path}: {exc.strerror or exc}"
            ) from exc
        # A failed send is not final: the Host may have refused early and left a reply.
        with contextlib.suppress(OSError):
            _send_frame(sock, encoded)
        try:
            raw = _recv_frame(sock, deadline)
        except (_BadFrame, OSError) as exc:
            raise SessionUnavailable(f"the session connection dropped: {exc}") from exc
    try:
        reply = msgspec.msgpack.decode(raw)
    except msgspec.DecodeError as exc:
        raise SessionUnavailable(f"the session sent a malformed reply: {exc}") from exc
    if not _well_formed(reply):
        raise SessionUnavailable("the session sent a malformed reply")
    result: dict[str, Any] = reply
    return result


def _well_formed(reply: Any) -> bool:
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
