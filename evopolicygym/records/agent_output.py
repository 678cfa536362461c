"""What a Run's Agent printed, per attempt, as the record holds it.

An attempt is one start of the Agent: 1 is the first, and a Run resumed after its Host
was interrupted under the Agent starts it again as the next. Its stdout and stderr are
blobs that ``AgentExited`` names; an attempt the Host died under has no such blobs, and
then its stdout is the raw stream chunks (``AgentMessages.raw_blob``) recorded while it
ran, and its stderr is lost. ``None`` below means "not recorded", ``b""`` "printed nothing".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from evopolicygym.records.events import AgentExited, AgentMessages, AgentStarted, Event
from evopolicygym.records.store import BlobStore, EventStore

__all__ = ["AgentAttempt", "Stream", "agent_attempts", "read_agent_attempts"]

Stream = Literal["stdout", "stderr"]

_AGENT_EVENTS = frozenset(cls.type_name() for cls in (AgentStarted, AgentMessages, AgentExited))


@dataclass
class AgentAttempt:
    attempt: int
    started: AgentStarted | None = None
    # None while the Agent runs, or when its Host died and no resume has said so yet.
    exited: AgentExited | None = None
    raw_chunks: list[str] = field(default_factory=list)  # live stream chunks' raw blobs, in order

    def output(self, blobs: BlobStore, stream: Stream) -> bytes | None:
        """The bytes the attempt wrote on ``stream`` as recorded (redacted as stored), or
        None when they were not recorded. Raises ``BlobError`` for a blob gone or corrupt."""
        exited = self.exited
        digest = (
            None
            if exited is None
            else exited.stdout_blob
            if stream == "stdout"
            else exited.stderr_blob
        )
        if digest is not None:
            return blobs.get(digest)
        if stream == "stdout" and self.raw_chunks:
            return b"".join(blobs.get(chunk) for chunk in self.raw_chunks)
        return None

    def unrecorded(self, stream: Stream) -> str:
        """Why ``stream`` of this attempt is not in the record (when ``output`` is None)."""
        exited = self.exited
        if exited is None:
            return "the Agent is still running, or its Host stopped without recording its exit"
        if exited.reason.startswith("start_failed"):
            return f"the Agent did not start ({exited.reason})"
        if exited.reason == "host_interrupted":
            return (
                "the Host was interrupted under this attempt, "
                "so only the stdout it streamed was kept"
            )
        return f"no {stream} blob in its exit record ({exited.reason or 'no reason'})"


def agent_attempts(events: Iterable[Event]) -> list[AgentAttempt]:
    """The Agent's attempts in ``events`` (a Run's, in order), attempt 1 first."""
    attempts: dict[int, AgentAttempt] = {}
    for event in events:
        if isinstance(event, AgentStarted):
            attempts.setdefault(event.attempt, AgentAttempt(event.attempt)).started = event
        elif isinstance(event, AgentMessages):
            if event.source is None and event.raw_blob is not None:
                attempts.setdefault(event.attempt, AgentAttempt(event.attempt)).raw_chunks.append(
                    event.raw_blob
                )
        elif isinstance(event, AgentExited):
            attempts.setdefault(event.attempt, AgentAttempt(event.attempt)).exited = event
    return [attempts[key] for key in sorted(attempts)]


def read_agent_attempts(events: EventStore, stream_id: str) -> list[AgentAttempt]:
    """``agent_attempts`` of the Run stream ``stream_id``, decoding only the Agent's events.
    Raises ``EventCodecError`` for one that does not decode."""
    return agent_attempts(
        envelope.event()
        for envelope in events.read_stream(stream_id, 0)
        if envelope.type in _AGENT_EVENTS
    )
