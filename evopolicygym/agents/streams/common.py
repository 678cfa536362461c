"""What the stream parsers share: the ``StreamParser`` protocol, the line loop of the
JSON-lines formats (``JsonLines``), counting what gives no message, tool arguments, token
usage and error records. The normalization they implement is described in
``agents.streams``.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import msgspec

from evopolicygym.transcript import AgentFault, Message, Usage

__all__ = [
    "MALFORMED",
    "JsonLines",
    "StreamParser",
    "ToolNames",
    "add_usage",
    "anthropic_usage",
    "as_dict",
    "as_list",
    "as_str",
    "count_kind",
    "decode_json",
    "error_record",
    "join_parts",
    "json_text",
    "max_usage",
    "openai_usage",
    "token_count",
    "tool_arguments",
]


class StreamParser(Protocol):
    """Turns one Agent's stdout lines into transcript messages."""

    unknown: dict[str, int]  # kinds of lines that gave no message, with their counts

    def feed(self, line: bytes) -> list[Message]:
        """One stdout line (without its newline): the messages it completes."""
        ...

    def close(self) -> list[Message]:
        """At EOF: the messages still pending."""
        ...


_DECODE_ANY = msgspec.json.Decoder()
_MAX_INT = 2**63 - 1  # what the event store's encoders accept
_MAX_DEPTH = 32  # of tool arguments kept as values; deeper parts are kept as JSON text
_MAX_KINDS = 64  # distinct keys in ``unknown``; the rest count under "other"
_MAX_KIND_CHARS = 64
_MAX_NAMES = 4096  # tool call ids remembered for naming their results


def count_kind(unknown: dict[str, int], kind: str) -> None:
    """Count a line of ``kind`` that gave no message (kinds are bounded in number and size)."""
    kind = kind[:_MAX_KIND_CHARS] or "?"
    if kind not in unknown and len(unknown) >= _MAX_KINDS:
        kind = "other"
    unknown[kind] = unknown.get(kind, 0) + 1


MALFORMED = object()


def decode_json(line: bytes) -> Any:
    """The JSON value of a line; ``MALFORMED`` when it is not JSON (or nests too deep)."""
    try:
        return _DECODE_ANY.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return MALFORMED


def as_str(value: Any) -> str | None:
    """``value`` if it is a string, else None (JSON fields are whatever the CLI printed)."""
    return value if isinstance(value, str) else None


def as_dict(value: Any) -> dict[str, Any] | None:
    """``value`` if it is an object, else None."""
    return value if isinstance(value, dict) else None


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def token_count(value: Any) -> int:
    """A token count: a non-negative int in the store's range, else 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), _MAX_INT)


def json_text(value: Any) -> str:
    """``value`` as JSON text; "…" when it cannot be encoded."""
    try:
        return msgspec.json.encode(value).decode()
    except (msgspec.EncodeError, RecursionError, TypeError, ValueError, OverflowError):
        return "…"


def _clip(value: Any, depth: int = 0) -> Any:
    """``value`` with parts nested deeper than ``_MAX_DEPTH`` replaced by their JSON text."""
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH:
            return json_text(value)
        return {str(k): _clip(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            return json_text(value)
        return [_clip(v, depth + 1) for v in value]
    return value


def tool_arguments(value: Any) -> dict[str, Any]:
    """Tool arguments as a dict: parsed from JSON text, wrapped when not an object."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        parsed = decode_json(value.encode())
        if parsed is MALFORMED:
            return {"value": value}
        value = parsed
    if isinstance(value, dict):
        clipped: dict[str, Any] = _clip(value)
        return clipped
    return {"value": _clip(value, 1)}


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """The sum of two usages (capped at the store's range); None only when both are."""
    if a is None:
        return b
    if b is None:
        return a
    return Usage(
        input_tokens=min(a.input_tokens + b.input_tokens, _MAX_INT),
        output_tokens=min(a.output_tokens + b.output_tokens, _MAX_INT),
        cached_tokens=min(a.cached_tokens + b.cached_tokens, _MAX_INT),
        cache_write_tokens=min(a.cache_write_tokens + b.cache_write_tokens, _MAX_INT),
        reasoning_tokens=min(a.reasoning_tokens + b.reasoning_tokens, _MAX_INT),
    )


def max_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """The larger of two usages, field by field; None only when both are."""
    if a is None:
        return b
    if b is None:
        return a
    return Usage(
        input_tokens=max(a.input_tokens, b.input_tokens),
        output_tokens=max(a.output_tokens, b.output_tokens),
        cached_tokens=max(a.cached_tokens, b.cached_tokens),
        cache_write_tokens=max(a.cache_write_tokens, b.cache_write_tokens),
        reasoning_tokens=max(a.reasoning_tokens, b.reasoning_tokens),
    )


def openai_usage(value: Any) -> Usage | None:
    """An OpenAI-style usage object (Codex's ``turn.completed``) as ``Usage``."""
    usage = as_dict(value)
    if usage is None:
        return None
    return Usage(
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cached_tokens=token_count(usage.get("cached_input_tokens")),
        cache_write_tokens=token_count(usage.get("cache_write_input_tokens")),
        reasoning_tokens=token_count(usage.get("reasoning_output_tokens")),
    )


def anthropic_usage(value: Any) -> Usage | None:
    """An Anthropic-style usage object as ``Usage``: cached and cache-writing tokens are
    counted in ``input_tokens`` too (OpenAI's convention)."""
    usage = as_dict(value)
    if usage is None:
        return None
    read = token_count(usage.get("cache_read_input_tokens"))
    created = token_count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=min(token_count(usage.get("input_tokens")) + read + created, _MAX_INT),
        output_tokens=token_count(usage.get("output_tokens")),
        cached_tokens=read,
        cache_write_tokens=created,
    )


_STATUS = re.compile(r"\b(?:status|Error:?)\s*([45]\d\d)\b")


def error_record(text: str, kind: str, status: int | None = None) -> Message:
    """An ``error`` record: a failure the CLI reported, never a turn of the conversation."""
    if status is None:
        found = _STATUS.search(text)
        status = int(found.group(1)) if found else None
    return Message(
        role="error",
        content=text,
        error=AgentFault(kind=kind[:_MAX_KIND_CHARS] or "error", status=status),
    )


def join_parts(parts: list[str], separator: str = "\n") -> str:
    """The non-empty ``parts`` joined."""
    return separator.join(p for p in parts if p)


class ToolNames:
    """Tool names by call id (bounded), for naming tool results."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def add(self, call_id: str, name: str) -> None:
        self._names.pop(call_id, None)
        if len(self._names) >= _MAX_NAMES:
            del self._names[next(iter(self._names))]
        self._names[call_id] = name

    def get(self, call_id: str | None) -> str | None:
        return None if call_id is None else self._names.get(call_id)


class JsonLines:
    """Shared line handling: JSON objects go to ``_event``; the rest is "malformed"."""

    provider = "agent"

    def __init__(self) -> None:
        self.unknown: dict[str, int] = {}
        self._names = ToolNames()
        self._anonymous = 0

    def feed(self, line: bytes) -> list[Message]:
        stripped = line.strip()
        if not stripped:
            return []
        event = decode_json(stripped)
        if not isinstance(event, dict):  # not JSON, or JSON that is not an object
            count_kind(self.unknown, "malformed")
            return []
        try:
            return self._event(event)
        except Exception:  # a bug here must not stop the Host reading the Agent's output
            count_kind(self.unknown, "parser-error")
            return []

    def close(self) -> list[Message]:
        try:
            return self._close()
        except Exception:
            count_kind(self.unknown, "parser-error")
            return []

    def _close(self) -> list[Message]:
        return []

    def _event(self, event: dict[str, Any]) -> list[Message]:
        raise NotImplementedError

    def _count(self, kind: str) -> None:
        count_kind(self.unknown, kind)

    def _call_id(self, value: Any) -> str:
        call_id = as_str(value)
        if call_id:
            return call_id
        self._anonymous += 1
        return f"{self.provider}-call-{self._anonymous}"
