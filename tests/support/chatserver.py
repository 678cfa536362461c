"""A scripted OpenAI-compatible Chat Completions server on loopback, for testing real clients.

``POST /v1/chat/completions`` takes the JSON body of the OpenAI API and answers, in order,
with the replies a test scripts:

- a message dict ``{"content": ..., "tool_calls": [{"name": ..., "arguments": ...}],
  "reasoning_content": ..., "usage": {...}, "finish_reason": ...}`` (all keys optional;
  ``arguments`` a dict is sent as its JSON string, a str is sent as is, so a test can send
  invalid JSON) becomes a ``chat.completion`` with that message;
- ``(status, "message")`` or ``HttpError(...)`` becomes an error reply with OpenAI's body
  ``{"error": {"message", "type", "code"}}``; ``(429, seconds)`` is a rate limit with a
  ``Retry-After`` header.

Every request body is kept in ``requests`` (its headers in ``headers``), so a test can see
what the model was shown. With ``api_key`` set, a request without ``Authorization: Bearer
<api_key>`` gets a 401 and uses no scripted reply; unlike OpenAI (which masks it), the
401 message repeats the key it was given in full, so a test can check that a client never
prints what a server says about its key. A request that breaks the protocol (tool results
that do not answer the preceding tool calls, arguments that are not a string, ...) gets
the 400 OpenAI would give; a request after the script has run out gets a 400 too.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["ChatServer", "HttpError", "Reply"]

ROLES = ("system", "user", "assistant", "tool", "developer")


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str = ""
    retry_after: float | None = None
    type: str | None = None
    code: str | None = None

    def body(self) -> dict[str, Any]:
        kind = self.type or (
            "server_error"
            if self.status >= 500
            else "requests"
            if self.status == 429
            else "invalid_request_error"
        )
        message = self.message or f"HTTP {self.status}"
        return {"error": {"message": message, "type": kind, "param": None, "code": self.code}}


Reply = dict[str, Any] | HttpError | tuple[int, Any]


class _Refused(Exception):
    def __init__(self, error: HttpError) -> None:
        super().__init__(error.message)
        self.error = error


class ChatServer:
    """Serves the scripted ``replies`` on ``127.0.0.1`` (a free port) in a thread."""

    def __init__(
        self, replies: list[Reply], *, api_key: str | None = None, model: str | None = None
    ) -> None:
        self.replies = list(replies)
        self.api_key = api_key
        self.model = model
        self.requests: list[dict[str, Any]] = []  # every JSON body POSTed, in order
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []  # what each request was answered with
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                server._post(self)

            def do_GET(self) -> None:
                server._send(self, 405, HttpError(405, "use POST").body())

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: pytest shows what a failing test prints

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL a client is given: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        with self.lock:
            return len(self.replies)

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ the protocol

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        headers = {k: v for k, v in handler.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self.lock:
            self.requests.append(
                body if isinstance(body, dict) else {"_raw": raw.decode("latin-1")}
            )
            self.headers.append(headers)
            try:
                status, payload, extra = self._answer(handler.path, headers, body)
            except _Refused as refused:
                error = refused.error
                status, payload = error.status, error.body()
                extra = {}
                if error.retry_after is not None:
                    extra["Retry-After"] = f"{error.retry_after:g}"
            self.statuses.append(status)
        self._send(handler, status, payload, extra)

    def _answer(
        self, path: str, headers: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path.rstrip("/") != "/v1/chat/completions":
            raise _Refused(HttpError(404, f"Invalid URL (POST {path})", code="unknown_url"))
        if self.api_key is not None:
            given = headers.get("Authorization", "")
            if given != f"Bearer {self.api_key}":
                key = given.removeprefix("Bearer ")
                message = (
                    f"Incorrect API key provided: {key}."
                    if key
                    else "You didn't provide an API key."
                )
                raise _Refused(HttpError(401, message, code="invalid_api_key"))
        if "application/json" not in headers.get("Content-Type", ""):
            raise _Refused(HttpError(400, "Content-Type must be application/json"))
        _check_request(body, self.model)
        if not self.replies:
            raise _Refused(HttpError(400, "chatserver: no scripted reply left"))
        reply = self.replies.pop(0)
        if isinstance(reply, tuple):
            status, detail = reply
            if isinstance(detail, int | float) and not isinstance(detail, bool):
                raise _Refused(HttpError(status, "Rate limit reached", retry_after=float(detail)))
            raise _Refused(HttpError(status, str(detail)))
        if isinstance(reply, HttpError):
            raise _Refused(reply)
        return 200, self._completion(body, reply), {}

    def _completion(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = []
        for call in reply.get("tool_calls") or ():
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": call.get("id") or f"call_{next(self._ids):04d}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
        if calls:
            message["tool_calls"] = calls
        for key in ("reasoning_content", "reasoning"):
            if key in reply:
                message[key] = reply[key]
        prompt = max(1, len(json.dumps(body["messages"])) // 4)
        completion = max(1, len(json.dumps(message)) // 4)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            **reply.get("usage", {}),
        }
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.get("finish_reason")
                    or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": usage,
        }

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        extra: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)


def _bad(message: str) -> _Refused:
    return _Refused(HttpError(400, message))


def _check_request(body: Any, model: str | None) -> None:
    """The checks OpenAI makes that a client could get wrong."""
    if not isinstance(body, dict):
        raise _bad("We could not parse the JSON body of your request.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _bad("you must provide a model parameter")
    if model is not None and body["model"] != model:
        raise _Refused(
            HttpError(404, f"The model `{body['model']}` does not exist", code="model_not_found")
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array")
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise _bad("tools must be of type 'function'")
        if not isinstance(function.get("name"), str) or not isinstance(
            function.get("parameters", {}), dict
        ):
            raise _bad("a tool function needs a name and object parameters")
    pending: list[str] = []  # tool call ids still to be answered
    for number, message in enumerate(messages):
        where = f"messages[{number}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise _bad(f"{where}: invalid role")
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                raise _bad(
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls'."
                )
            pending.remove(message["tool_call_id"])
            if not isinstance(message.get("content"), str):
                raise _bad(f"{where}: a tool message needs string content")
            continue
        if pending:
            raise _bad(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(pending)}"
            )
        if role == "assistant":
            content = message.get("content")
            if content is not None and not isinstance(content, str | list):
                raise _bad(f"{where}: invalid content")
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                    raise _bad(f"{where}: invalid tool call")
                if not isinstance(function.get("arguments"), str):
                    raise _bad(f"{where}: tool call arguments must be a JSON string")
                pending.append(call["id"])
        elif not isinstance(message.get("content"), str | list):
            raise _bad(f"{where}: invalid content")
    if pending:
        raise _bad(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {', '.join(pending)}"
        )
