"""Who may reach the viewer, and the headers every answer carries.

Bound to loopback without a token, only requests naming this machine as their ``Host`` are
answered (a web page elsewhere cannot read the store through DNS rebinding). With a token
(required on any other address), every request carries it: as ``Authorization`` (Bearer, or
the password of Basic credentials, which a browser asks for), or as the cookie a first visit
with ``?token=...`` sets (then redirected to the same address without it).

Every answer forbids inline script and every other origin (``Content-Security-Policy``):
the pages show untrusted text, and even if some escaped, no script of it would run.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from evopolicygym.serving import Gate, is_loopback

__all__ = ["COOKIE", "CSP", "Access", "security_headers"]

COOKIE = "evopolicy_view"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; media-src 'self'; connect-src 'self'; font-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def security_headers(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the viewer's security headers (replacing any of the same name)."""
    names = {name for name, _ in _HEADERS}
    return [*(h for h in headers if h[0].lower() not in names), *_HEADERS]


def _host_name(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    for key, value in headers:
        if key.lower() == b"host":
            text = value.decode("latin-1").strip()
            if text.startswith("["):
                return text[1 : text.find("]")] if "]" in text else None
            return text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    return None


def _cookie_token(headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    for key, value in headers:
        if key.lower() == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is no token
                return None
            morsel = jar.get(COOKIE)
            if morsel is not None:
                return morsel.value.encode("utf-8")
    return None


class Access(Gate):
    """The gate in front of the viewer (see the module docstring)."""

    BODY = b"a token is required: open the address the viewer printed, with ?token=..."

    def __init__(self, app: Any, token: str | None, bound_host: str) -> None:
        super().__init__(app, token)
        self._secret = token
        # The cookie holds a value derived from the token, cookie-safe whatever the token is.
        self._cookie = (
            hmac.new(token.encode("utf-8"), b"evopolicy view cookie", "sha256").hexdigest()
            if token
            else ""
        )
        self._bound = bound_host.strip("[]").lower()

    def admits(self, scope: dict[str, Any]) -> bool:
        headers = scope.get("headers", ())
        if self._secret is None:
            name = _host_name(headers)
            return name is not None and (is_loopback(name) or name.lower() == self._bound)
        if super().admits(scope):
            return True
        cookie = _cookie_token(headers)
        return cookie is not None and hmac.compare_digest(cookie, self._cookie.encode("utf-8"))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._secret is not None and await self._login(scope, send):
            return

        async def secured(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": security_headers(message.get("headers", []))}
            await send(message)

        if not self.admits(scope):
            await self.refuse(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    async def refuse(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self._secret is None:  # a Host this machine does not answer to
            body = b"this viewer answers requests for 127.0.0.1 or localhost only"
            headers = [(b"content-type", b"text/plain; charset=utf-8")]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        headers = [(b"content-type", b"text/plain; charset=utf-8"), self.CHALLENGE]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": self.BODY})

    async def _login(self, scope: dict[str, Any], send: Any) -> bool:
        """``?token=`` with the right token: set the cookie, redirect to the same address
        without it. A wrong one is left for ``admits`` to refuse."""
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in pairs if k == "token"]
        if not given or self._secret is None:
            return False
        if not hmac.compare_digest(given[-1].encode("utf-8"), self._secret.encode("utf-8")):
            return False
        rest = urlencode([(k, v) for k, v in pairs if k != "token"])
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        cookie = f"{COOKIE}={self._cookie}; Path=/; HttpOnly; SameSite=Strict"
        headers = security_headers(
            [
                (b"location", location.encode("utf-8")),
                (b"set-cookie", cookie.encode("utf-8")),
                (b"cache-control", b"no-store"),
            ]
        )
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return True
