"""The chat agent's model API: an OpenAI-compatible Chat Completions client, standard library only.

``ChatClient`` POSTs to ``{base_url}/chat/completions`` (OpenAI, vLLM, SGLang, Ollama and
the like), retrying 429, 5xx and connection failures with backoff (or the server's
``Retry-After``) and raising ``ApiError`` once the API failed for good; it never follows a
redirect (which would carry the API key elsewhere) and keeps the key out of what it
reports. The rest reads a completion: its message, text, usage and tool calls.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evopolicygym.agents.text import json_object, one_line
from evopolicygym.transcript import Usage

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "ApiError",
    "ChatClient",
    "ParsedCall",
    "choice_message",
    "content_text",
    "parse_calls",
    "response_usage",
]

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 5
BACKOFF_BASE_S, BACKOFF_FACTOR, BACKOFF_CAP_S = 0.5, 2.0, 8.0
RETRY_AFTER_CAP_S = 60.0  # a server asking for longer is not waited on longer


class ApiError(Exception):
    """The model API failed for good: a client error, or every retry spent."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the Authorization header elsewhere: it is an error instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class ChatClient:
    """POST ``{base_url}/chat/completions``, retrying 429, 5xx and connection failures."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key or None
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.sleep = sleep
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        host = urllib.parse.urlsplit(self.url).hostname or ""
        if host in ("localhost", "127.0.0.1", "::1"):
            handlers.append(urllib.request.ProxyHandler({}))  # loopback never goes via a proxy
        self.opener = urllib.request.build_opener(*handlers)

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "[redacted]") if self.api_key else text

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            "stream": False,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers["User-Agent"] = "evopolicygym-chat-agent"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                request = urllib.request.Request(
                    self.url, data=data, headers=headers, method="POST"
                )
                with self.opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
                payload = json_object(raw.decode("utf-8", errors="replace"))
                if payload is not None and choice_message(payload) is not None:
                    return payload
                problem = "the response is not a chat completion"
                if payload is not None and isinstance(payload.get("error"), dict):
                    problem += f": {_error_text(self.redact(raw.decode('utf-8', 'replace')))}"
            except urllib.error.HTTPError as exc:
                try:
                    text = _error_text(self.redact(exc.read().decode("utf-8", errors="replace")))
                except Exception:
                    text = exc.reason if isinstance(exc.reason, str) else ""
                problem = f"HTTP {exc.code}{': ' + text if text else ''}"
                if exc.code != 429 and exc.code < 500:
                    raise ApiError(
                        self.redact(f"the model API refused the request: {problem}")
                    ) from None
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc
                problem = f"{type(exc).__name__}: {reason}"
            problem = self.redact(one_line(problem, 300))
            if attempt >= self.max_retries:
                raise ApiError(f"the model API failed after {attempt + 1} attempt(s): {problem}")
            delay = (
                retry_after
                if retry_after is not None
                else min(BACKOFF_CAP_S, BACKOFF_BASE_S * BACKOFF_FACTOR**attempt)
            )
            print(f"chat agent: {problem}; retrying in {delay:g} s", file=sys.stderr, flush=True)
            self.sleep(delay)
            attempt += 1


def _error_text(text: str) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message"}}`` or the like)."""
    data = json_object(text)
    if data is not None:
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return one_line(str(error["message"]), 300)
        if isinstance(error, str):
            return one_line(error, 300)
        if isinstance(data.get("message"), str):
            return one_line(data["message"], 300)
    return one_line(text, 300)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def choice_message(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message of the completion's first choice, or ``None`` when it is no completion."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, dict) else None


def content_text(value: Any) -> str:
    """A message's ``content`` as text: a string, or its content parts joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in value
        )
    return str(value)


def response_usage(payload: Mapping[str, Any]) -> tuple[Usage | None, int]:
    """The response's usage, and the tokens it spent (prompt plus completion)."""
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return None, 0

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or count(usage.get("cached_tokens"))
    spent = prompt + completion or count(usage.get("total_tokens"))
    return Usage(input_tokens=prompt, output_tokens=completion, cached_tokens=cached), spent


@dataclass
class ParsedCall:
    """One tool call of a model message, its arguments parsed (or why they are unusable)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str  # the arguments as sent back to the API
    problem: str | None  # why the arguments are unusable


def parse_calls(message: Mapping[str, Any], turn: int) -> list[ParsedCall]:
    """The tool calls of a model message; a call without an id is named after ``turn``."""
    calls: list[ParsedCall] = []
    raw_calls = message.get("tool_calls")
    for number, item in enumerate(raw_calls if isinstance(raw_calls, list) else [], 1):
        if not isinstance(item, dict):
            continue
        found = item.get("function")
        function: dict[str, Any] = found if isinstance(found, dict) else {}
        given = item.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{turn}_{number}"
        named = function.get("name")
        name = named if isinstance(named, str) else ""
        arguments = function.get("arguments")
        problem = None
        if isinstance(arguments, dict):
            parsed: dict[str, Any] = arguments
            raw = json.dumps(arguments, ensure_ascii=False)
        else:
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            try:
                value = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                value, problem = None, f"the arguments are not valid JSON ({exc})"
            if problem is None and not isinstance(value, dict):
                problem = "the arguments are not a JSON object"
            if problem is None:
                assert isinstance(value, dict)
                parsed = value
            else:
                parsed = {"_raw": raw}
                # What goes back to the API must parse: some servers re-read it for templates.
                raw = json.dumps(parsed, ensure_ascii=False)
        calls.append(ParsedCall(call_id, name, parsed, raw, problem))
    return calls
