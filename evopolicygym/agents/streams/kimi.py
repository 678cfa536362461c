"""The ``kimi`` stream format.

``kimi --print --output-format stream-json`` (Kimi CLI docs, "Print mode"): each line
is a Message in the OpenAI chat shape, ``{"role": "assistant", "content", "tool_calls":
[{"type": "function", "id", "function": {"name", "arguments": JSON text}}]}`` and
``{"role": "tool", "tool_call_id", "content"}``. ``content`` is a string (as documented)
or, as the CLI's printer writes it, a list of parts: ``text`` and ``think`` (the
latter becomes ``reasoning``). Kimi prints no token usage. Lines with ``role: "meta"``
(Kimi Code's retry and resume notices) are counted as ``meta:<type>``, other non-message
lines (notifications) by their ``type``.
"""

from __future__ import annotations

import re
from typing import Any

from evopolicygym.agents.streams.common import (
    JsonLines,
    as_dict,
    as_list,
    as_str,
    error_record,
    join_parts,
    tool_arguments,
)
from evopolicygym.transcript import Message, ToolCall

__all__ = ["KimiParser"]

_KIMI_ERROR = re.compile(r"\b([a-z_]+(?:\.[a-z_]+)+):\s*(?:([45]\d\d)\b)?")
_MAX_STDERR_ERRORS = 8


class KimiParser(JsonLines):
    """``kimi --print --output-format stream-json`` messages (OpenAI chat shape)."""

    provider = "kimi"

    def _event(self, event: dict[str, Any]) -> list[Message]:
        role = event.get("role")
        if role is None:
            kind = as_str(event.get("type"))
            self._count(kind or "malformed")  # notifications, plan displays
            return []
        if role == "assistant":
            text, reasoning = self._content(event.get("content"), "")
            calls = []
            for raw in as_list(event.get("tool_calls")):
                call = as_dict(raw)
                if call is None:
                    self._count("malformed")
                    continue
                function = as_dict(call.get("function")) or {}
                call_id = self._call_id(call.get("id"))
                name = as_str(function.get("name")) or ""
                self._names.add(call_id, name)
                calls.append(
                    ToolCall(
                        id=call_id, name=name, arguments=tool_arguments(function.get("arguments"))
                    )
                )
            return [Message(role="assistant", content=text, reasoning=reasoning, tool_calls=calls)]
        if role == "tool":
            answered = as_str(event.get("tool_call_id"))
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
            kind = as_str(event.get("type"))
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
            out.append(error_record(said, kind, status))
        return out[-_MAX_STDERR_ERRORS:]

    def _content(self, content: Any, separator: str) -> tuple[str, str | None]:
        """(text, reasoning) of a string or a list of kosong content parts."""
        if isinstance(content, str):
            return content, None
        texts: list[str] = []
        thoughts: list[str] = []
        for part in as_list(content):
            part_type = as_str(part.get("type")) if isinstance(part, dict) else None
            if part_type == "text":
                texts.append(as_str(part.get("text")) or "")
            elif part_type == "think":
                thoughts.append(as_str(part.get("think")) or "")
            else:
                self._count(f"content:{part_type}" if part_type else "malformed")
        return join_parts(texts, separator), join_parts(thoughts, "\n\n") or None
