"""What the Host needs of an Agent implementation: the launcher interface.

``run`` never imports ``evopolicygym.agents``; whoever builds a ``RunHost`` hands it
a ``Launcher`` (``evopolicygym.agents.launcher.ProviderLauncher`` for the built-in
providers). The Agent is named by the ``AgentIdentity`` recorded in RunCreated, so
a resumed Run starts the same Agent again. Structural types: an implementation
matches them without importing this module.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from evopolicygym.transcript import AgentIdentity, Message

__all__ = ["AgentExitStatus", "Launch", "Launcher", "Redaction", "RunningAgent"]


class Launch(Protocol):
    """How to start an Agent: its command line, its environment (before the Session's
    variables), and the kind of its stdout stream (how it parses into messages)."""

    @property
    def argv(self) -> list[str]: ...

    @property
    def env(self) -> dict[str, str]: ...

    @property
    def stream(self) -> str: ...


class Redaction(Protocol):
    """Replaces the secrets an Agent's transcript, requests and output may hold."""

    def message(self, m: Message) -> Message: ...

    def value(self, v: Any) -> Any: ...

    def bytes(self, b: builtins.bytes) -> builtins.bytes: ...


class AgentExitStatus(Protocol):
    @property
    def exit_code(self) -> int | None: ...

    @property
    def signal(self) -> int | None: ...

    @property
    def reason(self) -> str: ...


class RunningAgent(Protocol):
    """One started Agent process; its normalized messages arrive through the callback
    given to ``Launcher.start``, from a thread of its own."""

    @property
    def pid(self) -> int: ...

    @property
    def started(self) -> float:
        """``time.monotonic()`` when it was started: its timeout counts from here."""
        ...

    def wait(self, timeout: float) -> int | None:
        """Its exit code once it has exited, else None after ``timeout`` seconds."""
        ...

    def stop(self, grace: float = ...) -> None:
        """Terminate it (and what it started), killing it after ``grace`` seconds."""
        ...

    def reap(self) -> None:
        """After it exited: end what it left running, read its stdout to the end."""
        ...

    @property
    def unknown_kinds(self) -> dict[str, int]:
        """Kinds of stdout lines its stream parser did not know, with their counts."""
        ...

    def drain(self) -> None:
        """Deliver the messages its stream parser holds back, before a session request's
        events are recorded."""
        ...

    def stdout_since(self, offset: int) -> builtins.bytes:
        """Its raw stdout from byte ``offset`` on, as read so far."""
        ...

    def outputs(self) -> tuple[builtins.bytes, builtins.bytes]:
        """Its stdout and stderr as kept, once it has exited."""
        ...

    def status(self, reason: str) -> AgentExitStatus:
        """How it ended, with the Host's ``reason`` (exited, timeout, stopped)."""
        ...


class Launcher(Protocol):
    """Turns a recorded Agent identity into a running, contained Agent."""

    def launch(self, agent: AgentIdentity, task: str) -> Launch:
        """How to start ``agent`` on ``task`` (the Host's task text, the prompt of CLI
        agents). Raises ValueError, saying what to fix, when it cannot be started
        (say, its command is gone from PATH since the Run began)."""
        ...

    def redactor(self, agent: AgentIdentity) -> Redaction:
        """What keeps ``agent``'s secrets (its credentials among them) out of the record."""
        ...

    def start(
        self,
        argv: list[str],
        *,
        stream: str,
        cwd: str,
        env: dict[str, str],
        hide: Sequence[str],
        on_message: Callable[[Message], None],
    ) -> RunningAgent:
        """Start ``argv`` where the ``hide`` directories are out of its sight, parsing its
        stdout as ``stream``. Raises OSError when the process cannot be started."""
        ...

    def session_record(
        self,
        agent: AgentIdentity,
        stdout: builtins.bytes,
        stderr: builtins.bytes,
        env: dict[str, str],
        workspace: str,
    ) -> SessionTranscript | None:
        """An ended attempt's transcript as its CLI's own session record holds it, found by
        what its output (``stdout``, ``stderr``) says of its session; None where the CLI
        keeps none or it cannot be found."""
        ...


class SessionTranscript(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def raw(self) -> builtins.bytes: ...

    @property
    def messages(self) -> list[Message]: ...

    @property
    def tools(self) -> list[dict[str, Any]] | None: ...
