"""Agent stdout streams: each CLI's JSON lines normalized into transcript ``Message`` s.

The Host reads an Agent's stdout line by line (a line is at most 1 MiB; longer ones never
reach a parser) and keeps every byte in the raw stream blob. A ``StreamParser`` turns those
lines into ``transcript.Message`` s: ``feed(line)`` returns the messages the line
completes, ``close()`` at EOF returns whatever is still pending. Nothing a parser is fed
makes it raise. What yields no message is counted in ``unknown`` by kind (a line's event
type, ``"malformed"`` for a line that is not a JSON object, ``"parser-error"`` should a
parser fail on a line) so that a lossy transcript is visible; the line itself stays in the
raw blob. Lifecycle events whose content later events
repeat or that carry nothing for a chat transcript (Codex ``thread.started``,
``turn.started``, ``item.started``, ``item.updated``; Claude/Qoder ``system``/``init`` and
``result``) are consumed without being counted; blank lines are ignored.

Normalization, common to all parsers:

- Roles are ``assistant`` (text in ``content``, thinking in ``reasoning``, calls in
  ``tool_calls``), ``tool`` (a result: ``tool_call_id`` and, when known, the tool's
  ``name``) and ``user``. ``at`` is left 0: the Host stamps arrival time.
- Tool ``arguments`` are always a dict: a JSON string of arguments is parsed; a value that
  is not an object becomes ``{"value": ...}``; none at all is ``{}``. Nesting deeper than
  32 levels is kept as the JSON text of the deeper value, so a message always encodes.
- Tool call ids are the CLI's own; a call without one gets ``<provider>-call-<n>``
  (``n`` counting such calls), so replaying a stream gives the same ids.
- ``Usage.input_tokens`` counts every prompt token, cached ones included;
  ``cached_tokens`` is the cached part of it (OpenAI's convention). Anthropic-style usage
  (Claude Code, Qoder) is converted: input = ``input_tokens`` +
  ``cache_creation_input_tokens`` + ``cache_read_input_tokens``, cached =
  ``cache_read_input_tokens``.

Formats (each provider's fixture under ``tests/fixtures/agent-streams/`` has a ``.md``
saying where its format is documented):

``native``
    Our own agents (``reference``, ``chat``, ``command``) print ``Message`` JSON, one per
    line. A line that decodes (strictly) as a ``Message`` object is that message, exactly
    as ``agents/process.py`` reads it today; anything else is counted under ``"text"``.

``codex``
    ``codex exec --json`` (openai/codex ``docs/exec.md``, "JSON output mode"; the types are
    ``codex-rs/exec/src/exec_events.rs``). Only ``item.completed`` carries content:
    ``agent_message`` is an assistant message; ``reasoning`` (a summary of the model's
    thinking) is held and becomes the ``reasoning`` of the next assistant message of the
    turn, or of an assistant message of its own (empty content) when the turn ends first;
    ``command_execution`` is an assistant call ``shell`` with ``{"command": ...}`` and a tool
    result (``aggregated_output`` then ``[exit code N]``); ``file_change`` a call
    ``apply_patch`` with ``{"changes": [{"path", "kind"}]}`` and a result listing them with
    the status; ``mcp_tool_call`` a call named ``mcp__<server>__<tool>`` (Codex's own name
    for it) with the call's arguments and a result (text content, else structured
    content, else the error). Call ids are the item ids. ``turn.completed`` usage goes on the
    last assistant message of the turn: a text-only assistant message is held back until
    the next message or the end of the turn for that (calls and results are never held), and
    a turn that ends without one gets a trailing assistant message with empty content.
    ``web_search``, ``todo_list``, ``error`` and other items, ``turn.failed`` and ``error``
    events are counted (``item:<type>`` for items). At EOF, commands and tool calls started
    but never completed are emitted as assistant calls without a result.

``claude-code``
    ``claude -p --output-format stream-json --verbose`` (Claude Code docs, "Headless mode"
    / "Run Claude Code programmatically"; the message types are the Agent SDK's
    ``SDKMessage``). One API response is printed as several ``assistant`` lines sharing a
    ``message.id`` and the same ``usage`` (Agent SDK "Tracking costs and usage"): they are
    merged into one assistant message, its usage counted once; ``text`` blocks are its
    content, ``thinking`` its reasoning, ``tool_use`` its calls. A ``user`` line's
    ``tool_result`` blocks are tool messages (string or text-block content), its text a user
    message. The ``result`` line's usage is authoritative (the SDK documents per-step
    ``output_tokens`` as a placeholder): the last assistant message before it absorbs the
    difference between the result's totals and the usage already given to messages, so the
    transcript's usage sums to the CLI's own totals. Subagent traffic (lines with a
    ``parent_tool_use_id``) is counted under ``"subagent"``, other ``system`` subtypes
    under ``system:<subtype>``, non-text content blocks under ``content:<type>``.

``kimi``
    ``kimi --print --output-format stream-json`` (Kimi CLI docs, "Print mode"): each line
    is a Message in the OpenAI chat shape, ``{"role": "assistant", "content", "tool_calls":
    [{"type": "function", "id", "function": {"name", "arguments": JSON text}}]}`` and
    ``{"role": "tool", "tool_call_id", "content"}``. ``content`` is a string (as documented)
    or, as the CLI's printer writes it, a list of parts: ``text`` and ``think`` (the
    latter becomes ``reasoning``). Kimi prints no token usage. Lines with ``role: "meta"``
    (Kimi Code's retry and resume notices) are counted as ``meta:<type>``, other non-message
    lines (notifications) by their ``type``.

``qoder``
    ``qodercli -p --output-format stream-json``: Qoder's documentation describes this JSONL
    message stream through its Agent SDK (docs.qoder.com, CLI > SDK: "How it works" and
    "SDK References"); no page documents the print-mode flag's output on its own. The
    messages are Claude-Code-compatible (``system``/``init`` with ``qodercli_version``,
    ``assistant`` and ``user`` messages with content blocks, ``result``), so Qoder is read
    exactly as ``claude-code``; its extra kinds (``system`` hook events,
    ``stream_event``, ``command_lifecycle``...) are counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage

__all__ = [
    "PARSERS",
    "ClaudeCodeParser",
    "CodexParser",
    "KimiParser",
    "NativeParser",
    "QoderParser",
    "StreamParser",
    "anthropic_usage",
    "openai_usage",
    "parser_for",
    "synthetic_fault",
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


_DECODE_MESSAGE = msgspec.json.Decoder(Message)
_DECODE_ANY = msgspec.json.Decoder()
_MAX_INT = 2**63 - 1  # what the event store's encoders accept
_MAX_DEPTH = 32  # of tool arguments kept as values; deeper parts are kept as JSON text
_MAX_KINDS = 64  # distinct keys in ``unknown``; the rest count under "other"
_MAX_KIND_CHARS = 64
_MAX_NAMES = 4096  # tool call ids remembered for naming their results
_MAX_OPEN = 32  # Codex tool items started and not completed
_MAX_GROUP = 64  # Claude lines merged into one assistant message
_MAX_PENDING_CHARS = 4 * 1024 * 1024  # reasoning held for the next assistant message


# --------------------------------------------------------------------------- helpers


def _count(unknown: dict[str, int], kind: str) -> None:
    kind = kind[:_MAX_KIND_CHARS] or "?"
    if kind not in unknown and len(unknown) >= _MAX_KINDS:
        kind = "other"
    unknown[kind] = unknown.get(kind, 0) + 1


_MALFORMED = object()


def _decode(line: bytes) -> Any:
    """The JSON value of a line; ``_MALFORMED`` when it is not JSON (or nests too deep)."""
    try:
        return _DECODE_ANY.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return _MALFORMED


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def token_count(value: Any) -> int:
    """A token count: a non-negative int in the store's range, else 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), _MAX_INT)


def _json_text(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (msgspec.EncodeError, RecursionError, TypeError, ValueError, OverflowError):
        return "…"


def _clip(value: Any, depth: int = 0) -> Any:
    """``value`` with parts nested deeper than ``_MAX_DEPTH`` replaced by their JSON text."""
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH:
            return _json_text(value)
        return {str(k): _clip(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            return _json_text(value)
        return [_clip(v, depth + 1) for v in value]
    return value


def tool_arguments(value: Any) -> dict[str, Any]:
    """Tool arguments as a dict: parsed from JSON text, wrapped when not an object."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        parsed = _decode(value.encode())
        if parsed is _MALFORMED:
            return {"value": value}
        value = parsed
    if isinstance(value, dict):
        clipped: dict[str, Any] = _clip(value)
        return clipped
    return {"value": _clip(value, 1)}


def _add(a: Usage | None, b: Usage | None) -> Usage | None:
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


def _max(a: Usage | None, b: Usage | None) -> Usage | None:
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
    usage = _dict(value)
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
    usage = _dict(value)
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


def _fault(text: str, kind: str, status: int | None = None) -> Message:
    """An ``error`` record: a failure the CLI reported, never a turn of the conversation."""
    if status is None:
        found = _STATUS.search(text)
        status = int(found.group(1)) if found else None
    return Message(
        role="error",
        content=text,
        error=AgentFault(kind=kind[:_MAX_KIND_CHARS] or "error", status=status),
    )


def synthetic_fault(event: dict[str, Any]) -> Message | None:
    """A Claude Code (or qoder) assistant line the CLI made up itself (``"model":
    "<synthetic>"``, or with an ``error``: an API error, "Not logged in") as an error record;
    None for a line of the model's. The stream and the session file both carry such lines."""
    message = _dict(event.get("message")) or {}
    if message.get("model") != "<synthetic>" and event.get("error") is None:
        return None
    texts = [
        _str(block.get("text")) or ""
        for block in _list(message.get("content"))
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    kind = _str(event.get("error")) or "synthetic"
    return _fault(_join(texts), "synthetic" if kind == "unknown" else kind)


def _error_text(value: Any) -> tuple[str, str | None]:
    """(message, type) of an error given as text that may be an API's JSON error body."""
    text = _str(value) or ""
    body = _decode(text.encode()) if text.startswith("{") else None
    error = _dict(body.get("error")) if isinstance(body, dict) else None
    if error is not None:
        return _str(error.get("message")) or text, _str(error.get("type")) or _str(
            error.get("code")
        )
    return text, None


def _join(parts: list[str], separator: str = "\n") -> str:
    return separator.join(p for p in parts if p)


class _Names:
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


class _JsonLines:
    """Shared line handling: JSON objects go to ``_event``; the rest is "malformed"."""

    provider = "agent"

    def __init__(self) -> None:
        self.unknown: dict[str, int] = {}
        self._names = _Names()
        self._anonymous = 0

    def feed(self, line: bytes) -> list[Message]:
        stripped = line.strip()
        if not stripped:
            return []
        event = _decode(stripped)
        if not isinstance(event, dict):  # not JSON, or JSON that is not an object
            _count(self.unknown, "malformed")
            return []
        try:
            return self._event(event)
        except Exception:  # a bug here must not stop the Host reading the Agent's output
            _count(self.unknown, "parser-error")
            return []

    def close(self) -> list[Message]:
        try:
            return self._close()
        except Exception:
            _count(self.unknown, "parser-error")
            return []

    def _close(self) -> list[Message]:
        return []

    def _event(self, event: dict[str, Any]) -> list[Message]:
        raise NotImplementedError

    def _count(self, kind: str) -> None:
        _count(self.unknown, kind)

    def _call_id(self, value: Any) -> str:
        call_id = _str(value)
        if call_id:
            return call_id
        self._anonymous += 1
        return f"{self.provider}-call-{self._anonymous}"


# --------------------------------------------------------------------------- native


class NativeParser:
    """Our own agents' lines: ``Message`` JSON, decoded as ``agents/process.py`` does."""

    def __init__(self) -> None:
        self.unknown: dict[str, int] = {}

    def feed(self, line: bytes) -> list[Message]:
        stripped = line.strip()
        if not stripped:
            return []
        if stripped.startswith(b"{"):
            try:
                return [_DECODE_MESSAGE.decode(stripped)]
            except (msgspec.DecodeError, RecursionError):
                pass
        _count(self.unknown, "text")
        return []

    def close(self) -> list[Message]:
        return []


# --------------------------------------------------------------------------- codex

_CODEX_CALLS = ("command_execution", "file_change", "mcp_tool_call")


class CodexParser(_JsonLines):
    """``codex exec --json`` events."""

    provider = "codex"

    def __init__(self) -> None:
        super().__init__()
        self._reasoning: list[str] = []
        self._reasoning_chars = 0
        self._held: Message | None = None  # a text-only assistant message awaiting usage
        self._open: dict[str, dict[str, Any]] = {}  # tool items started, not completed
        self._last_error: str | None = None

    def _event(self, event: dict[str, Any]) -> list[Message]:
        kind = _str(event.get("type"))
        if kind is None:
            self._count("malformed")
            return []
        if kind in ("thread.started", "turn.started"):
            return []
        if kind in ("item.started", "item.updated"):
            return self._started(_dict(event.get("item")))
        if kind == "item.completed":
            return self._completed(_dict(event.get("item")))
        if kind == "turn.completed":
            return self._end_turn(openai_usage(event.get("usage")))
        if kind == "turn.failed":
            text, error_type = _error_text((_dict(event.get("error")) or {}).get("message"))
            out = self._end_turn(None)
            if text and text != self._last_error:  # codex says it twice: as "error", then here
                out.append(_fault(text, error_type or "turn_failed"))
            self._last_error = None
            return out
        if kind == "error":  # a stream or API error, or a retry notice
            text, error_type = _error_text(event.get("message"))
            self._last_error = text
            return [*self._release(), _fault(text, error_type or "error")]
        self._count(kind)  # anything newer
        return []

    def _close(self) -> list[Message]:
        out = self._release()
        for item in list(self._open.values()):
            call = self._tool_call(item)
            if call is not None:
                out.append(self._assistant(tool_calls=[call]))
        self._open.clear()
        return out + self._end_turn(None)

    # ---- items

    def _started(self, item: dict[str, Any] | None) -> list[Message]:
        if item is None:
            self._count("malformed")
            return []
        item_id = _str(item.get("id"))
        if item.get("type") not in _CODEX_CALLS or not item_id:
            return []
        if item_id not in self._open and len(self._open) >= _MAX_OPEN:
            del self._open[next(iter(self._open))]
        self._open[item_id] = item
        # Another message follows: a held text message is not the last of the turn.
        return self._release()

    def _completed(self, item: dict[str, Any] | None) -> list[Message]:
        if item is None:
            self._count("malformed")
            return []
        item_type = _str(item.get("type"))
        item_id = _str(item.get("id"))
        if item_id:
            self._open.pop(item_id, None)
        if item_type == "reasoning":
            text = _str(item.get("text"))
            if text:
                self._reasoning.append(text)
                self._reasoning_chars += len(text)
                if self._reasoning_chars > _MAX_PENDING_CHARS:  # bounded: say it now
                    return [*self._release(), self._assistant()]
            return []
        if item_type == "agent_message":
            out = self._release()
            self._held = self._assistant(content=_str(item.get("text")) or "")
            return out
        if item_type in _CODEX_CALLS:
            call = self._tool_call(item)
            assert call is not None
            out = self._release()
            out.append(self._assistant(tool_calls=[call]))
            out.append(
                Message(
                    role="tool",
                    content=self._result(item_type, item),
                    tool_call_id=call.id,
                    name=call.name,
                )
            )
            return out
        if item_type == "error":  # a notice of the CLI's own (an unknown model, a config problem)
            return [*self._release(), _fault(_str(item.get("message")) or "", "cli_error")]
        self._count(f"item:{item_type}" if item_type else "malformed")
        return []

    def _tool_call(self, item: dict[str, Any]) -> ToolCall | None:
        item_type = item.get("type")
        call_id = self._call_id(item.get("id"))
        arguments: dict[str, Any]
        if item_type == "command_execution":
            name, arguments = "shell", {"command": _str(item.get("command")) or ""}
        elif item_type == "file_change":
            changes = [
                {"path": _str(c.get("path")) or "", "kind": _str(c.get("kind")) or ""}
                for c in _list(item.get("changes"))
                if isinstance(c, dict)
            ]
            name, arguments = "apply_patch", {"changes": changes}
        elif item_type == "mcp_tool_call":
            server = _str(item.get("server")) or ""
            tool = _str(item.get("tool")) or ""
            name, arguments = f"mcp__{server}__{tool}", tool_arguments(item.get("arguments"))
        else:
            return None
        self._names.add(call_id, name)
        return ToolCall(id=call_id, name=name, arguments=arguments)

    @staticmethod
    def _result(item_type: str, item: dict[str, Any]) -> str:
        status = _str(item.get("status")) or ""
        if item_type == "command_execution":
            output = _str(item.get("aggregated_output")) or ""
            code = item.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                trailer = f"[exit code {code}]"
            else:
                trailer = f"[{status or 'no exit code'}]"
            return (
                f"{output}\n{trailer}" if output and not output.endswith("\n") else output + trailer
            )
        if item_type == "file_change":
            lines = [
                f"{_str(c.get('kind')) or '?'} {_str(c.get('path')) or '?'}"
                for c in _list(item.get("changes"))
                if isinstance(c, dict)
            ]
            return _join([*lines, f"[{status or '?'}]"])
        # mcp_tool_call
        error = _dict(item.get("error"))
        if error is not None:
            return f"error: {_str(error.get('message')) or ''}"
        result = _dict(item.get("result")) or {}
        texts = [
            _str(block.get("text")) or ""
            for block in _list(result.get("content"))
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        if any(texts):
            return _join(texts)
        structured = result.get("structured_content")
        return "" if structured is None else _json_text(structured)

    # ---- assistant messages, reasoning and usage

    def _assistant(self, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        """An assistant message taking the pending reasoning."""
        reasoning = _join(self._reasoning, "\n\n") or None
        self._reasoning, self._reasoning_chars = [], 0
        return Message(
            role="assistant", content=content, reasoning=reasoning, tool_calls=tool_calls or []
        )

    def _release(self) -> list[Message]:
        held, self._held = self._held, None
        return [held] if held is not None else []

    def _end_turn(self, usage: Usage | None) -> list[Message]:
        out = self._release()
        if self._reasoning:
            out.append(self._assistant())
        if usage is not None:
            if out:
                out[-1] = msgspec.structs.replace(out[-1], usage=usage)
            else:
                out.append(Message(role="assistant", usage=usage))
        return out


# --------------------------------------------------------------------------- claude-code


class ClaudeCodeParser(_JsonLines):
    """``claude -p --output-format stream-json --verbose`` messages."""

    provider = "claude"

    def __init__(self) -> None:
        super().__init__()
        self._group: list[dict[str, Any]] = []  # lines of one API message (same message.id)
        self._group_id: str | None = None
        self._since_result: Usage | None = None  # usage given to messages since the last result
        self._fault: Message | None = None  # a synthetic error awaiting its result line

    def _event(self, event: dict[str, Any]) -> list[Message]:
        kind = _str(event.get("type"))
        held: list[Message] = []
        if self._fault is not None and kind != "result":
            held, self._fault = [self._fault], None
        return held + self._line(kind, event)

    def _line(self, kind: str | None, event: dict[str, Any]) -> list[Message]:
        if kind is None:
            self._count("malformed")
            return []
        if kind == "assistant":
            return self._assistant_line(event)
        if kind == "user":
            out = self._flush()
            return out + self._user_line(event)
        if kind == "result":
            return self._result(event)
        if kind == "system":
            subtype = _str(event.get("subtype"))
            if subtype != "init":
                self._count(f"system:{subtype}" if subtype else "system")
            return []
        self._count(kind)  # stream_event, tool_progress, control messages, anything newer
        return []

    def _close(self) -> list[Message]:
        held, self._fault = ([self._fault] if self._fault is not None else []), None
        return self._flush() + held

    def drain(self) -> list[Message]:
        """The assistant message held for more of its lines, now: the tool call it ends with
        is running (a session request arrived), so no more lines of it will come."""
        try:
            return self._flush()
        except Exception:
            self._count("parser-error")
            return []

    # ---- assistant

    def _message_of(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The API message a line carries; None (counted) if malformed or a subagent's."""
        message = _dict(event.get("message"))
        if message is None:
            self._count("malformed")
            return None
        if event.get("parent_tool_use_id") is not None:
            self._count("subagent")
            return None
        return message

    def _assistant_line(self, event: dict[str, Any]) -> list[Message]:
        message = self._message_of(event)
        if message is None:
            return []
        fault = synthetic_fault(event)
        if fault is not None:
            # A failure, not a turn: held for the result line that follows with the HTTP status.
            pending = self._flush()
            self._fault = fault
            return pending
        message_id = _str(message.get("id"))
        out: list[Message] = []
        if self._group and (message_id is None or message_id != self._group_id):
            out = self._flush()
        self._group.append(message)
        self._group_id = message_id
        if message_id is None or len(self._group) >= _MAX_GROUP:
            out += self._flush()
        return out

    def _flush(self, absorb: Usage | None = None) -> list[Message]:
        """The pending assistant message; ``absorb``: the result's totals, when it ends."""
        group, self._group, self._group_id = self._group, [], None
        if not group:
            return []
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        usage: Usage | None = None
        for message in group:
            usage = _max(usage, anthropic_usage(message.get("usage")))
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
                continue
            for block in _list(content):
                block_type = _str(block.get("type")) if isinstance(block, dict) else None
                if block_type is None:
                    self._count("malformed")
                elif block_type == "text":
                    texts.append(_str(block.get("text")) or "")
                elif block_type == "thinking":
                    thoughts.append(_str(block.get("thinking")) or "")
                elif block_type == "tool_use":
                    call_id = self._call_id(block.get("id"))
                    name = _str(block.get("name")) or ""
                    self._names.add(call_id, name)
                    calls.append(
                        ToolCall(
                            id=call_id, name=name, arguments=tool_arguments(block.get("input"))
                        )
                    )
                else:
                    self._count(f"content:{block_type}")
        if absorb is not None:
            # The result's totals are authoritative: the last message takes what is missing.
            given = self._since_result or Usage()
            rest = Usage(
                input_tokens=max(absorb.input_tokens - given.input_tokens, 0),
                output_tokens=max(absorb.output_tokens - given.output_tokens, 0),
                cached_tokens=max(absorb.cached_tokens - given.cached_tokens, 0),
            )
            usage = _max(usage, rest)
        self._since_result = _add(self._since_result, usage)
        return [
            Message(
                role="assistant",
                content=_join(texts),
                reasoning=_join(thoughts, "\n\n") or None,
                tool_calls=calls,
                usage=usage,
            )
        ]

    # ---- user and result

    def _user_line(self, event: dict[str, Any]) -> list[Message]:
        message = self._message_of(event)
        if message is None:
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [Message(role="user", content=content)]
        out: list[Message] = []
        texts: list[str] = []
        for block in _list(content):
            block_type = _str(block.get("type")) if isinstance(block, dict) else None
            if block_type is None:
                self._count("malformed")
            elif block_type == "text":
                texts.append(_str(block.get("text")) or "")
            elif block_type == "tool_result":
                if texts:
                    out.append(Message(role="user", content=_join(texts)))
                    texts = []
                call_id = _str(block.get("tool_use_id"))
                out.append(
                    Message(
                        role="tool",
                        content=self._result_text(block.get("content")),
                        tool_call_id=call_id,
                        name=self._names.get(call_id),
                    )
                )
            else:
                self._count(f"content:{block_type}")
        if texts:
            out.append(Message(role="user", content=_join(texts)))
        if not out and not isinstance(content, list):
            self._count("malformed")
        return out

    def _result_text(self, content: Any) -> str:
        if isinstance(content, str):
            return content
        texts: list[str] = []
        for block in _list(content):
            block_type = _str(block.get("type")) if isinstance(block, dict) else None
            if block_type == "text":
                texts.append(_str(block.get("text")) or "")
            else:
                self._count(f"content:{block_type}" if block_type else "malformed")
        return _join(texts)

    def _result(self, event: dict[str, Any]) -> list[Message]:
        fault, self._fault = self._fault, None
        if event.get("is_error") is True:
            status = event.get("api_error_status")
            status = status if isinstance(status, int) and not isinstance(status, bool) else None
            if fault is None:
                subtype = _str(event.get("subtype")) or "result"
                fault = _fault(
                    _str(event.get("result")) or "", subtype if subtype != "success" else "result"
                )
            if status is not None and fault.error is not None:
                fault = msgspec.structs.replace(
                    fault, error=AgentFault(kind=fault.error.kind, status=status)
                )
        out = self._usage_of_result(event)
        return out if fault is None else [*out, fault]

    def _usage_of_result(self, event: dict[str, Any]) -> list[Message]:
        totals = anthropic_usage(event.get("usage"))
        if totals is None:
            out = self._flush()
        elif self._group:
            out = self._flush(absorb=totals)
        else:
            given = self._since_result or Usage()
            rest = Usage(
                input_tokens=max(totals.input_tokens - given.input_tokens, 0),
                output_tokens=max(totals.output_tokens - given.output_tokens, 0),
                cached_tokens=max(totals.cached_tokens - given.cached_tokens, 0),
            )
            out = [] if rest == Usage() else [Message(role="assistant", usage=rest)]
        self._since_result = None
        return out


class QoderParser(ClaudeCodeParser):
    """``qodercli -p --output-format stream-json``: the Claude-Code-compatible SDK stream."""

    provider = "qoder"


# --------------------------------------------------------------------------- kimi


_KIMI_ERROR = re.compile(r"\b([a-z_]+(?:\.[a-z_]+)+):\s*(?:([45]\d\d)\b)?")
_MAX_STDERR_ERRORS = 8


class KimiParser(_JsonLines):
    """``kimi --print --output-format stream-json`` messages (OpenAI chat shape)."""

    provider = "kimi"

    def _event(self, event: dict[str, Any]) -> list[Message]:
        role = event.get("role")
        if role is None:
            kind = _str(event.get("type"))
            self._count(kind or "malformed")  # notifications, plan displays
            return []
        if role == "assistant":
            text, reasoning = self._content(event.get("content"), "")
            calls = []
            for raw in _list(event.get("tool_calls")):
                call = _dict(raw)
                if call is None:
                    self._count("malformed")
                    continue
                function = _dict(call.get("function")) or {}
                call_id = self._call_id(call.get("id"))
                name = _str(function.get("name")) or ""
                self._names.add(call_id, name)
                calls.append(
                    ToolCall(
                        id=call_id, name=name, arguments=tool_arguments(function.get("arguments"))
                    )
                )
            return [Message(role="assistant", content=text, reasoning=reasoning, tool_calls=calls)]
        if role == "tool":
            answered = _str(event.get("tool_call_id"))
            result, _ = self._content(event.get("content"), "\n")
            return [
                Message(
                    role="tool",
                    content=result,
                    tool_call_id=answered,
                    name=self._names.get(answered),
                )
            ]
        if role in ("user", "system"):
            said, _ = self._content(event.get("content"), "\n")
            return [Message(role=role, content=said)]
        if role == "meta":
            kind = _str(event.get("type"))
            self._count(f"meta:{kind}" if kind else "meta")
            return []
        self._count(f"role:{role}" if isinstance(role, str) else "malformed")
        return []

    def stderr(self, text: str) -> list[Message]:
        """Kimi Code reports a failed run on stderr only (``error: failed to run prompt:
        provider.api_error: 400 ...``): each such line is an error record."""
        out = []
        for line in text.splitlines()[-_MAX_STDERR_ERRORS * 4 :]:
            if not line.startswith("error: "):
                continue
            said = line.removeprefix("error: ").strip()
            found = _KIMI_ERROR.search(said)
            kind = found.group(1) if found else "error"
            status = int(found.group(2)) if found and found.group(2) else None
            out.append(_fault(said, kind, status))
        return out[-_MAX_STDERR_ERRORS:]

    def _content(self, content: Any, separator: str) -> tuple[str, str | None]:
        """(text, reasoning) of a string or a list of kosong content parts."""
        if isinstance(content, str):
            return content, None
        texts: list[str] = []
        thoughts: list[str] = []
        for part in _list(content):
            part_type = _str(part.get("type")) if isinstance(part, dict) else None
            if part_type == "text":
                texts.append(_str(part.get("text")) or "")
            elif part_type == "think":
                thoughts.append(_str(part.get("think")) or "")
            else:
                self._count(f"content:{part_type}" if part_type else "malformed")
        return _join(texts, separator), _join(thoughts, "\n\n") or None


# --------------------------------------------------------------------------- registry

PARSERS: dict[str, Callable[[], StreamParser]] = {
    "native": NativeParser,
    "codex": CodexParser,
    "claude-code": ClaudeCodeParser,
    "kimi": KimiParser,
    "qoder": QoderParser,
}

_NATIVE_PROVIDERS = ("reference", "command", "chat")


def parser_for(provider: str) -> StreamParser:
    """A fresh parser for an Agent provider's (or a stream format's) stdout."""
    key = "native" if provider in _NATIVE_PROVIDERS else provider
    factory = PARSERS.get(key)
    if factory is None:
        known = ", ".join([*PARSERS, *_NATIVE_PROVIDERS])
        raise ValueError(f"no stream parser for {provider!r}; known: {known}")
    return factory()
