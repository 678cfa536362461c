"""Serving an ASGI app on this machine: a listening socket, uvicorn, and the token gate.

``evopolicy serve-env`` (the training environment) and ``evopolicy view`` (the store viewer)
both bind 127.0.0.1 by default; any other address needs a token that every request carries
(``Gate``). A leaf: the standard library only, uvicorn imported when ``serve`` runs.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import socket
from collections.abc import Sequence
from typing import Any

__all__ = ["Gate", "is_loopback", "listen", "presented_token", "serve", "url_of"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def presented_token(headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    """The token a request carries: a Bearer token, or the password of Basic credentials."""
    for key, value in headers:
        if key.lower() != b"authorization":
            continue
        scheme, _sep, rest = value.strip().partition(b" ")
        if scheme.lower() == b"bearer":
            return rest.strip()
        if scheme.lower() == b"basic":
            try:
                decoded = base64.b64decode(rest.strip(), validate=True)
            except (binascii.Error, ValueError):
                return None
            return decoded.partition(b":")[2]
    return None


class Gate:
    """ASGI middleware. With a ``token``, every HTTP request and WebSocket upgrade carries it,
    or is answered 401 before it reaches the app. And a WebSocket whose client has gone closes
    quietly: closing one the client already closed would log a traceback per session."""

    CHALLENGE = (b"www-authenticate", b'Bearer realm="evopolicy", Basic realm="evopolicy"')
    BODY = b'{"detail": "a token is required: Authorization: Bearer <token>"}'

    def __init__(self, app: Any, token: str | None = None) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None

    def admits(self, scope: dict[str, Any]) -> bool:
        """Whether the request may reach the app (it carries the token, if one is set)."""
        if self._token is None:
            return True
        presented = presented_token(scope.get("headers", ()))
        return presented is not None and hmac.compare_digest(presented, self._token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        if not self.admits(scope):
            await self.refuse(scope, receive, send)
            return
        if scope["type"] == "http":
            await self.app(scope, receive, send)
            return

        async def send_quietly(message: dict[str, Any]) -> None:
            try:
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected
                if message.get("type") != "websocket.close":
                    raise

        await self.app(scope, receive, send_quietly)

    async def refuse(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Answer 401 with the challenge (a WebSocket: a denial response, else a close)."""
        headers = [(b"content-type", b"application/json"), self.CHALLENGE]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": self.BODY})
            return
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": self.BODY})
        else:  # a server without denial responses refuses the upgrade (403) instead
            await send({"type": "websocket.close", "code": 1008})


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: any free port); ``OSError`` if it cannot."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def serve(app: Any, sock: socket.socket, *, graceful_s: int | None = None) -> None:
    """Serve ``app`` on ``sock`` until SIGINT or SIGTERM (uvicorn's own handling).
    ``graceful_s``: how long open responses (an event stream) may hold the shutdown."""
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=graceful_s,
    )
    uvicorn.Server(config).run(sockets=[sock])
