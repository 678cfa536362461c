"""The transcript a built-in agent writes on stdout: one normalized ``Message`` per line.

Both built-in agents (``reference`` and ``chat``) write their transcript through
``TranscriptWriter``; the Host reads it with ``streams.NativeParser``. Each line is
flushed as it is written, so the Host records the transcript as it happens. Once nobody
reads stdout any more (a broken pipe, a closed stream), lines are dropped and the agent
goes on: what it does to the session is recorded by the Host all the same.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import IO, Any

import msgspec

from evopolicygym.transcript import Message, ToolCall

__all__ = ["TranscriptWriter"]


class TranscriptWriter:
    """The normalized transcript on a stream: one ``Message`` per line, flushed per line.

    Reasoning said with ``say`` becomes the text of the next assistant message; ``tool``
    records one call as an assistant message with that call, followed by the tool's result.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.pending: list[str] = []
        self.calls = 0

    def emit(self, message: Message) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.stream.write(msgspec.json.encode(message) + b"\n")
            self.stream.flush()

    def say(self, text: str) -> None:
        self.pending.append(text)

    def flush(self) -> None:
        if self.pending:
            self.emit(
                Message(role="assistant", content="\n\n".join(self.pending), at=time.time_ns())
            )
            self.pending = []

    def result(self, call_id: str, name: str, content: str) -> None:
        """The tool message answering call ``call_id`` of tool ``name``."""
        self.emit(
            Message(
                role="tool", content=content, tool_call_id=call_id, name=name, at=time.time_ns()
            )
        )

    def tool(
        self,
        name: str,
        arguments: dict[str, Any],
        run: Callable[[], str],
        *,
        call_id: str | None = None,
    ) -> str:
        """Record a call of ``name``, run it, record and return its result. Calls are
        numbered ``call_0001``, … unless ``call_id`` names this one."""
        if call_id is None:
            self.calls += 1
            call_id = f"call_{self.calls:04d}"
        self.emit(
            Message(
                role="assistant",
                content="\n\n".join(self.pending),
                tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
                at=time.time_ns(),
            )
        )
        self.pending = []
        result = run()
        self.result(call_id, name, result)
        return result
