"""The ``codex`` stream format.

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
"""

from __future__ import annotations

from typing import Any

import msgspec

from evopolicygym.agents.streams.common import (
    JsonLines,
    as_dict,
    as_list,
    as_str,
    decode_json,
    error_record,
    join_parts,
    json_text,
    openai_usage,
    tool_arguments,
)
from evopolicygym.transcript import Message, ToolCall, Usage

__all__ = ["CodexParser"]

_MAX_OPEN = 32  # Codex tool items started and not completed
_MAX_PENDING_CHARS = 4 * 1024 * 1024  # reasoning held for the next assistant message
_CODEX_CALLS = ("command_execution", "file_change", "mcp_tool_call")


def _error_text(value: Any) -> tuple[str, str | None]:
    """(message, type) of an error given as text that may be an API's JSON error body."""
    text = as_str(value) or ""
    body = decode_json(text.encode()) if text.startswith("{") else None
    error = as_dict(body.get("error")) if isinstance(body, dict) else None
    if error is not None:
        return as_str(error.get("message")) or text, as_str(error.get("type")) or as_str(
            error.get("code")
        )
    return text, None


class CodexParser(JsonLines):
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
        kind = as_str(event.get("type"))
        if kind is None:
            self._count("malformed")
            return []
        if kind in ("thread.started", "turn.started"):
            return []
        if kind in ("item.started", "item.updated"):
            return self._started(as_dict(event.get("item")))
        if kind == "item.completed":
            return self._completed(as_dict(event.get("item")))
        if kind == "turn.completed":
            return self._end_turn(openai_usage(event.get("usage")))
        if kind == "turn.failed":
            text, error_type = _error_text((as_dict(event.get("error")) or {}).get("message"))
            out = self._end_turn(None)
            if text and text != self._last_error:  # codex says it twice: as "error", then here
                out.append(error_record(text, error_type or "turn_failed"))
            self._last_error = None
            return out
        if kind == "error":  # a stream or API error, or a retry notice
            text, error_type = _error_text(event.get("message"))
            self._last_error = text
            return [*self._release(), error_record(text, error_type or "error")]
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
        item_id = as_str(item.get("id"))
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
        item_type = as_str(item.get("type"))
        item_id = as_str(item.get("id"))
        if item_id:
            self._open.pop(item_id, None)
        if item_type == "reasoning":
            text = as_str(item.get("text"))
            if text:
                self._reasoning.append(text)
                self._reasoning_chars += len(text)
                if self._reasoning_chars > _MAX_PENDING_CHARS:  # bounded: say it now
                    return [*self._release(), self._assistant()]
            return []
        if item_type == "agent_message":
            out = self._release()
            self._held = self._assistant(content=as_str(item.get("text")) or "")
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
            return [*self._release(), error_record(as_str(item.get("message")) or "", "cli_error")]
        self._count(f"item:{item_type}" if item_type else "malformed")
        return []

    def _tool_call(self, item: dict[str, Any]) -> ToolCall | None:
        item_type = item.get("type")
        call_id = self._call_id(item.get("id"))
        arguments: dict[str, Any]
        if item_type == "command_execution":
            name, arguments = "shell", {"command": as_str(item.get("command")) or ""}
        elif item_type == "file_change":
            changes = [
                {"path": as_str(c.get("path")) or "", "kind": as_str(c.get("kind")) or ""}
                for c in as_list(item.get("changes"))
                if isinstance(c, dict)
            ]
            name, arguments = "apply_patch", {"changes": changes}
        elif item_type == "mcp_tool_call":
            server = as_str(item.get("server")) or ""
            tool = as_str(item.get("tool")) or ""
            name, arguments = f"mcp__{server}__{tool}", tool_arguments(item.get("arguments"))
        else:
            return None
        self._names.add(call_id, name)
        return ToolCall(id=call_id, name=name, arguments=arguments)

    @staticmethod
    def _result(item_type: str, item: dict[str, Any]) -> str:
        status = as_str(item.get("status")) or ""
        if item_type == "command_execution":
            output = as_str(item.get("aggregated_output")) or ""
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
                f"{as_str(c.get('kind')) or '?'} {as_str(c.get('path')) or '?'}"
                for c in as_list(item.get("changes"))
                if isinstance(c, dict)
            ]
            return join_parts([*lines, f"[{status or '?'}]"])
        # mcp_tool_call
        error = as_dict(item.get("error"))
        if error is not None:
            return f"error: {as_str(error.get('message')) or ''}"
        result = as_dict(item.get("result")) or {}
        texts = [
            as_str(block.get("text")) or ""
            for block in as_list(result.get("content"))
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        if any(texts):
            return join_parts(texts)
        structured = result.get("structured_content")
        return "" if structured is None else json_text(structured)

    # ---- assistant messages, reasoning and usage

    def _assistant(self, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        """An assistant message taking the pending reasoning."""
        reasoning = join_parts(self._reasoning, "\n\n") or None
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
