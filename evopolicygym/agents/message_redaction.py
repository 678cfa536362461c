"""The redactor of agent transcripts: ``evopolicygym.redaction``'s, with messages.

The shapes, literals and their encodings live in the leaf ``evopolicygym.redaction``
(exporters use it too); this ``Redactor`` adds what only the agents' record holds:
transcript ``Message`` and ``ToolCall`` values, redacted field by field (role and ids
kept), so a message with nothing to replace is returned as it is.
"""

from __future__ import annotations

from typing import Any

import msgspec

from evopolicygym.redaction import Redactor as TextRedactor
from evopolicygym.transcript import Message, ToolCall

__all__ = ["Redactor"]


class Redactor(TextRedactor):
    """A ``evopolicygym.redaction.Redactor`` that also redacts transcript messages."""

    def value(self, v: Any) -> Any:
        if isinstance(v, Message):
            return self.message(v)
        if isinstance(v, ToolCall):
            return self._tool_call(v)
        return super().value(v)

    def _tool_call(self, call: ToolCall) -> ToolCall:
        name, arguments = self.text(call.name), self.value(call.arguments)
        if name is call.name and arguments is call.arguments:
            return call
        return msgspec.structs.replace(call, name=name, arguments=arguments)

    def message(self, m: Message) -> Message:
        """``m`` with its content, reasoning, tool calls and name redacted; role and ids kept."""
        content = self.text(m.content)
        reasoning = None if m.reasoning is None else self.text(m.reasoning)
        calls = m.tool_calls or []
        tool_calls = [self._tool_call(call) for call in calls]
        name = None if m.name is None else self.text(m.name)
        if (
            content is m.content
            and reasoning is m.reasoning
            and name is m.name
            and all(new is old for new, old in zip(tool_calls, calls, strict=True))
        ):
            return m
        return msgspec.structs.replace(
            m,
            content=content,
            reasoning=reasoning,
            tool_calls=tool_calls if m.tool_calls is not None else m.tool_calls,
            name=name,
        )
