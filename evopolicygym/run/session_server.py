"""The Session server: the Agent's requests reach the Host over a private Unix socket.

The wire (frames, JSON bodies, request and reply shapes) is ``evopolicygym.protocol``'s.
The server checks each request against the typed shapes below and hands it to the Host's
handler, one request at a time; what the request *means* (budget, selectors, candidates)
is the handler's business, not this module's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from evopolicygym.hostdirs import private_dir
from evopolicygym.program import MAX_FILES
from evopolicygym.protocol import (
    MAX_SELECTOR_CHARS,
    READ_TIMEOUT_S,
    FrameError,
    error_reply,
    recv_frame,
    send_frame,
    well_formed,
)

__all__ = ["FinishRequest", "Handler", "SessionServer", "SubmitRequest", "decode_request"]

RequestId = Annotated[str, Meta(min_length=1, max_length=200)]


class SubmitRequest(Struct, tag="submit", tag_field="op", forbid_unknown_fields=True):
    """Evaluate a program on the Episodes ``episodes`` names; ``problem`` instead of
    ``files`` when the client could not capture the program (the Host records that too)."""

    request_id: RequestId
    episodes: Annotated[str, Meta(max_length=MAX_SELECTOR_CHARS)]
    files: Annotated[dict[str, bytes], Meta(max_length=MAX_FILES)] | None  # base64 on the wire
    problem: str | None
    # The Submission the program was edited from (0: the initial program), when the Agent
    # says: what its edit is measured against. None: not said.
    parent: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None

    def __post_init__(self) -> None:
        # msgspec turns this into a ValidationError, so it reads like the other shape errors.
        if (self.files is None) == (self.problem is None):
            raise ValueError("exactly one of `files` and `problem` must be given")


class FinishRequest(Struct, tag="finish", tag_field="op", forbid_unknown_fields=True):
    """End the Agent's work, naming Submission ids as candidates, best first."""

    request_id: RequestId
    candidates: Annotated[list[int], Meta(max_length=1000)]


_REQUEST = msgspec.json.Decoder(SubmitRequest | FinishRequest)
_REPLY = msgspec.json.Encoder()


def decode_request(body: bytes | bytearray) -> SubmitRequest | FinishRequest:
    """A request body as its typed shape; ``msgspec.DecodeError`` (or ``ValidationError``)
    says how it is malformed."""
    return _REQUEST.decode(body)


SOCKET_NAME = "session.sock"
_UNIX_PATH_MAX = 107  # sun_path is 108 bytes, one of them the terminating NUL

Handler = Callable[[dict[str, Any]], dict[str, Any]]

log = logging.getLogger(__name__)


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
        # Beside the Host's private directory, not in it: the Agent must reach this one.
        self._dir = private_dir("evopolicy-session-", directory or tempfile.gettempdir())
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
            body = recv_frame(conn, time.monotonic() + self._read_timeout)
        except FrameError as exc:
            reply = self._malformed(str(exc))
        except OSError:
            return  # the client is stuck or gone: nobody to reply to
        else:
            reply = self._reply(body)
        try:
            encoded = _REPLY.encode(reply)
        except Exception as exc:
            log.error("session handler returned an unencodable reply: %s", exc)
            encoded = _REPLY.encode(error_reply("internal_error", "unencodable reply"))
        conn.settimeout(self._read_timeout)
        with contextlib.suppress(OSError):
            send_frame(conn, encoded)

    def _reply(self, body: bytearray) -> dict[str, Any]:
        try:
            parsed = decode_request(body)
        except msgspec.DecodeError as exc:
            return self._malformed(str(exc))
        except RecursionError:  # JSON nested deeper than the decoder goes
            return self._malformed("the request is nested too deeply")
        op = "submit" if isinstance(parsed, SubmitRequest) else "finish"
        try:
            reply = self._handler({"op": op, **msgspec.structs.asdict(parsed)})
        except Exception:
            log.exception("session handler failed on %s", op)
            # The detail (paths, Host state) stays in the Host's log, not with the Agent.
            return error_reply(
                "internal_error", "the Host failed to handle the request; see its log"
            )
        if not well_formed(reply):
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
        return reply if well_formed(reply) and reply["ok"] is False else fallback
