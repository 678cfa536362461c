"""The ``claude-code`` stream format, and ``qoder``'s, which is the same.

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

Qoder's ``qodercli -p --output-format stream-json``: its documentation describes this
JSONL message stream through its Agent SDK (docs.qoder.com, CLI > SDK: "How it works" and
"SDK References"); no page documents the print-mode flag's output on its own. The
messages are Claude-Code-compatible (``system``/``init`` with ``qodercli_version``,
``assistant`` and ``user`` messages with content blocks, ``result``), so Qoder is read
exactly as ``claude-code``; its extra kinds (``system`` hook events,
``stream_event``, ``command_lifecycle``...) are counted.
"""

from __future__ import annotations

from typing import Any

import msgspec

from evopolicygym.agents.streams.common import (
    JsonLines,
    add_usage,
    anthropic_usage,
    as_dict,
    as_list,
    as_str,
    error_record,
    join_parts,
    max_usage,
    tool_arguments,
)
from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage

__all__ = ["ClaudeCodeParser", "QoderParser", "synthetic_fault"]

_MAX_GROUP = 64  # Claude lines merged into one assistant message


def synthetic_fault(event: dict[str, Any]) -> Message | None:
    """A Claude Code (or qoder) assistant line the CLI made up itself (``"model":
    "<synthetic>"``, or with an ``error``: an API error, "Not logged in") as an error record;
    None for a line of the model's. The stream and the session file both carry such lines."""
    message = as_dict(event.get("message")) or {}
    if message.get("model") != "<synthetic>" and event.get("error") is None:
        return None
    texts = [
        as_str(block.get("text")) or ""
        for block in as_list(message.get("content"))
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    kind = as_str(event.get("error")) or "synthetic"
    return error_record(join_parts(texts), "synthetic" if kind == "unknown" else kind)


class ClaudeCodeParser(JsonLines):
    """``claude -p --output-format stream-json --verbose`` messages."""

    provider = "claude"

    def __init__(self) -> None:
        super().__init__()
        self._group: list[dict[str, Any]] = []  # lines of one API message (same message.id)
        self._group_id: str | None = None
        self._since_result: Usage | None = None  # usage given to messages since the last result
        self._fault: Message | None = None  # a synthetic error awaiting its result line

    def _event(self, event: dict[str, Any]) -> list[Message]:
        kind = as_str(event.get("type"))
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
            subtype = as_str(event.get("subtype"))
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
        message = as_dict(event.get("message"))
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
        message_id = as_str(message.get("id"))
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
            usage = max_usage(usage, anthropic_usage(message.get("usage")))
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
                continue
            for block in as_list(content):
                block_type = as_str(block.get("type")) if isinstance(block, dict) else None
                if block_type is None:
                    self._count("malformed")
                elif block_type == "text":
                    texts.append(as_str(block.get("text")) or "")
                elif block_type == "thinking":
                    thoughts.append(as_str(block.get("thinking")) or "")
                elif block_type == "tool_use":
                    call_id = self._call_id(block.get("id"))
                    name = as_str(block.get("name")) or ""
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
            usage = max_usage(usage, rest)
        self._since_result = add_usage(self._since_result, usage)
        return [
            Message(
                role="assistant",
                content=join_parts(texts),
                reasoning=join_parts(thoughts, "\n\n") or None,
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
        for block in as_list(content):
            block_type = as_str(block.get("type")) if isinstance(block, dict) else None
            if block_type is None:
                self._count("malformed")
            elif block_type == "text":
                texts.append(as_str(block.get("text")) or "")
            elif block_type == "tool_result":
                if texts:
                    out.append(Message(role="user", content=join_parts(texts)))
                    texts = []
                call_id = as_str(block.get("tool_use_id"))
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
            out.append(Message(role="user", content=join_parts(texts)))
        if not out and not isinstance(content, list):
            self._count("malformed")
        return out

    def _result_text(self, content: Any) -> str:
        if isinstance(content, str):
            return content
        texts: list[str] = []
        for block in as_list(content):
            block_type = as_str(block.get("type")) if isinstance(block, dict) else None
            if block_type == "text":
                texts.append(as_str(block.get("text")) or "")
            else:
                self._count(f"content:{block_type}" if block_type else "malformed")
        return join_parts(texts)

    def _result(self, event: dict[str, Any]) -> list[Message]:
        fault, self._fault = self._fault, None
        if event.get("is_error") is True:
            status = event.get("api_error_status")
            status = status if isinstance(status, int) and not isinstance(status, bool) else None
            if fault is None:
                subtype = as_str(event.get("subtype")) or "result"
                fault = error_record(
                    as_str(event.get("result")) or "", subtype if subtype != "success" else "result"
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
