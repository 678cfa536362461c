"""A scripted model server on loopback that speaks what the released agent CLIs speak.

Three dialects, each streamed as server-sent events the way the real APIs stream them:

- ``responses`` — OpenAI's Responses API (``POST /v1/responses``), what codex uses;
- ``messages`` — Anthropic's Messages API (``POST /v1/messages``), what Claude Code uses
  (``/v1/messages/count_tokens`` is answered too);
- ``chat`` — OpenAI Chat Completions (``POST /v1/chat/completions``, ``stream: true``),
  what Kimi Code and kimi-cli use.

A test scripts the model's side of the conversation as a list of ``Turn`` (what one
model response says: reasoning, text, tool calls, its usage) or ``HttpError`` (the
request is refused with that status and the API's error body). Requests of the agent's
own loop (those that offer tools) take the next scripted item; a request without tools
(Claude Code's title or quota probes) gets a short text answer and takes nothing.

Everything is kept for the test to compare with what the CLI recorded: ``requests``
(each loop request's JSON body), ``sent`` (per answered loop request, the ``Turn`` sent
with the call ids and usage it was given) and ``statuses``.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = ["Call", "HttpError", "ModelServer", "Turn"]

Dialect = Literal["responses", "messages", "chat"]


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    id: str = ""  # given by the server when empty


@dataclass(frozen=True)
class Turn:
    text: str = ""
    reasoning: str = ""
    calls: tuple[Call, ...] = ()
    # Token counts the response reports; the server fills them in when left at 0 so each
    # response has distinct, checkable figures.
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str = "scripted error"


@dataclass
class _Exchange:
    body: dict[str, Any]
    headers: dict[str, str]
    path: str


@dataclass
class ModelServer:
    dialect: Dialect
    script: list[Turn | HttpError]
    model: str = "test-model"
    # The answer once the script has run out (a CLI may retry a refused key).
    exhausted: HttpError = field(
        default_factory=lambda: HttpError(400, "modelserver: script exhausted")
    )
    requests: list[dict[str, Any]] = field(default_factory=list)
    side_requests: list[dict[str, Any]] = field(default_factory=list)
    sent: list[Turn] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.script = list(self.script)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._post(self)

            def do_GET(self) -> None:
                server._json(self, 404, {"error": {"message": "not found"}})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        """The ``/v1`` base URL (OpenAI-style clients); Claude Code takes ``origin``."""
        return f"{self.origin}/v1"

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self.script)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    # ------------------------------------------------------------------ dispatch

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(handler, 400, {"error": {"message": "body is not JSON"}})
            return
        path = handler.path.split("?")[0].rstrip("/")
        if path.endswith("/messages/count_tokens"):
            self._json(handler, 200, {"input_tokens": max(1, len(raw) // 4)})
            return
        expected = {"responses": "/responses", "messages": "/messages", "chat": "/chat/completions"}
        if not path.endswith(expected[self.dialect]):
            self._json(handler, 404, {"error": {"message": f"unknown path {path}"}})
            return
        loop = bool(body.get("tools"))
        with self._lock:
            if not loop:
                self.side_requests.append(body)
                item: Turn | HttpError = Turn(text="ok")
            else:
                self.requests.append(body)
                item = self.script.pop(0) if self.script else self.exhausted
                if isinstance(item, Turn):
                    item = self._numbered(item, len(self.requests))
                    self.sent.append(item)
            status = item.status if isinstance(item, HttpError) else 200
            if loop:
                self.statuses.append(status)
        if isinstance(item, HttpError):
            self._json(handler, item.status, self._error_body(item))
            return
        events = {"responses": self._responses, "messages": self._messages, "chat": self._chat}[
            self.dialect
        ]
        self._stream(handler, events(body, item))

    def _numbered(self, turn: Turn, number: int) -> Turn:
        calls = tuple(
            c if c.id else replace(c, id=f"call_{number:02d}_{i}") for i, c in enumerate(turn.calls)
        )
        return replace(
            turn,
            calls=calls,
            input_tokens=turn.input_tokens or 1000 * number + 11,
            cached_tokens=turn.cached_tokens or 100 * number,
            cache_write_tokens=turn.cache_write_tokens or 10 * number,
            output_tokens=turn.output_tokens or 20 * number + 3,
            reasoning_tokens=turn.reasoning_tokens or (5 * number if turn.reasoning else 0),
        )

    def _error_body(self, error: HttpError) -> dict[str, Any]:
        if self.dialect == "messages":
            kind = {401: "authentication_error", 429: "rate_limit_error"}.get(
                error.status, "invalid_request_error"
            )
            if error.status >= 500:
                kind = "api_error"
            return {"type": "error", "error": {"type": kind, "message": error.message}}
        kind = "invalid_api_key" if error.status == 401 else None
        return {"error": {"message": error.message, "type": "invalid_request_error", "code": kind}}

    # ------------------------------------------------------------------ the dialects

    def _responses(
        self, body: dict[str, Any], turn: Turn
    ) -> list[tuple[str | None, dict[str, Any]]]:
        rid = f"resp_{next(self._ids)}"
        items: list[dict[str, Any]] = []
        if turn.reasoning:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{next(self._ids)}",
                    "summary": [{"type": "summary_text", "text": turn.reasoning}],
                }
            )
        if turn.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{next(self._ids)}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for call in turn.calls:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{next(self._ids)}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": json.dumps(call.arguments),
                    "status": "completed",
                }
            )
        head = {
            "id": rid,
            "object": "response",
            "model": body.get("model"),
            "status": "in_progress",
            "output": [],
        }
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": head})
        ]
        for index, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": item},
                )
            )
            if item["type"] == "message":
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": turn.text,
                        },
                    )
                )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        usage = {
            "input_tokens": turn.input_tokens,
            "input_tokens_details": {"cached_tokens": turn.cached_tokens},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
            "total_tokens": turn.input_tokens + turn.output_tokens,
        }
        done = {**head, "status": "completed", "output": items, "usage": usage}
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        return events

    def _messages(
        self, body: dict[str, Any], turn: Turn
    ) -> list[tuple[str | None, dict[str, Any]]]:
        usage = {
            "input_tokens": turn.input_tokens,
            "cache_creation_input_tokens": turn.cache_write_tokens,
            "cache_read_input_tokens": turn.cached_tokens,
            "output_tokens": 1,  # the stream's placeholder, as the API sends it
        }
        message = {
            "id": f"msg_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if turn.reasoning:
            blocks.append(
                (
                    {"type": "thinking", "thinking": "", "signature": ""},
                    {"type": "thinking_delta", "thinking": turn.reasoning},
                )
            )
        if turn.text:
            blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": turn.text}))
        for call in turn.calls:
            blocks.append(
                (
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
                    {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)},
                )
            )
        for index, (start, delta) in enumerate(blocks):
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
            if start["type"] == "thinking":
                signature = {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": signature},
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        stop = "tool_use" if turn.calls else "end_turn"
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": turn.output_tokens},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def _chat(self, body: dict[str, Any], turn: Turn) -> list[tuple[str | None, dict[str, Any]]]:
        cid = f"chatcmpl-{next(self._ids)}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
            return None, {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": body.get("model"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        if turn.reasoning:
            events.append(chunk({"reasoning_content": turn.reasoning}))
        if turn.text:
            events.append(chunk({"content": turn.text}))
        for index, call in enumerate(turn.calls):
            start = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(chunk({"tool_calls": [start]}))
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": json.dumps(call.arguments)}}
                        ]
                    }
                )
            )
        events.append(chunk({}, "tool_calls" if turn.calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": turn.input_tokens,
                "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
            }
            events.append(
                (
                    None,
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "model": body.get("model"),
                        "choices": [],
                        "usage": usage,
                    },
                )
            )
        return events

    # ------------------------------------------------------------------ the wire

    def _stream(
        self, handler: BaseHTTPRequestHandler, events: list[tuple[str | None, dict[str, Any]]]
    ) -> None:
        parts = []
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            parts.append(f"{prefix}data: {json.dumps(data)}\n\n")
        if self.dialect == "chat":
            parts.append("data: [DONE]\n\n")
        payload = "".join(parts).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
