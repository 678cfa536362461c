"""One rollout as one Run: the Host in a thread of its own, the trainer's model as its Agent.

The Host is the one every CLI Run has (``RunHost``: the same decider, Session server,
Evaluations, Validation and Assessment); only the Agent differs. ``TrainerLauncher``
"starts" it by handing the Session's address to the rollout instead of a process, and
``TrainerAgent`` stands for the model inside the Host: it is running until the rollout
ends it, and the messages the environment records of the model's tool calls reach the
transcript through it, as a CLI's parsed stream would.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evopolicygym.agents.message_redaction import Redactor
from evopolicygym.agents.process import ExitStatus
from evopolicygym.agents.providers import AgentLaunch
from evopolicygym.evaluation import Evaluator
from evopolicygym.protocol import SESSION_ENV
from evopolicygym.records.location import Store
from evopolicygym.run.decider import RunState
from evopolicygym.run.host import RunHost
from evopolicygym.transcript import AgentIdentity, Message

__all__ = ["Rollout", "TrainerAgent", "TrainerLauncher"]

START_TIMEOUT_S = 600.0  # for the Host to publish the workspace and open the Session


class TrainerAgent:
    """The model as the Host's supervisor sees an Agent: alive until ``end``."""

    def __init__(
        self, workspace: Path, session: str, on_message: Callable[[Message], None]
    ) -> None:
        self.workspace = workspace
        self.session = session  # the Session's socket
        self.deliver = on_message
        self.started = time.monotonic()
        self._ended = threading.Event()
        self._exit_code: int | None = None

    @property
    def pid(self) -> int:
        return os.getpid()  # the model lives in the trainer's process

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def end(self, exit_code: int = 0) -> None:
        if not self._ended.is_set():
            self._exit_code = exit_code
            self._ended.set()

    def wait(self, timeout: float) -> int | None:
        return self._exit_code if self._ended.wait(timeout) else None

    def stop(self, grace: float = 0.0) -> None:
        """The Host's stop (its timeout, a closed Session): the model's tools refuse from now."""
        self.end(exit_code=-1)

    def reap(self) -> None:
        pass

    @property
    def unknown_kinds(self) -> dict[str, int]:
        return {}

    def drain(self) -> None:
        pass  # each message is delivered before the request it leads to

    def stdout_since(self, offset: int) -> bytes:
        return b""

    def outputs(self) -> tuple[bytes, bytes]:
        return b"", b""

    def status(self, reason: str) -> ExitStatus:
        return ExitStatus(exit_code=self._exit_code, signal=None, reason=reason)


class TrainerLauncher:
    """The Host's launcher for one rollout: its one Agent is the trainer's model."""

    def __init__(self) -> None:
        self.agent: TrainerAgent | None = None
        self.task: str | None = None  # the Run's TASK.md, as the Host wrote it
        self.started = threading.Event()

    def launch(self, agent: AgentIdentity, task: str) -> AgentLaunch:
        if self.agent is not None:  # a second attempt: the model's rollout is one attempt
            raise ValueError("the trainer's model has one attempt per Run")
        self.task = task
        return AgentLaunch(argv=["trainer", str(agent.model or "")], env={}, stream="trainer")

    def redactor(self, agent: AgentIdentity) -> Redactor:
        return Redactor.from_environment([])  # no credentials: the known secret patterns

    def start(
        self,
        argv: list[str],
        *,
        stream: str,
        cwd: str,
        env: dict[str, str],
        hide: Sequence[str],
        on_message: Callable[[Message], None],
    ) -> TrainerAgent:
        # ``hide``: the model reaches nothing but the workspace, through the environment's tools.
        self.agent = TrainerAgent(Path(cwd), env[SESSION_ENV], on_message)
        self.started.set()
        return self.agent

    def session_record(self, *args: object, **kwargs: object) -> None:
        return None  # the transcript is what the environment recorded


class Rollout:
    """One Run carried by a ``RunHost`` in a daemon thread, its Agent the trainer's model."""

    def __init__(self, store: Store, run_id: str, evaluator: Evaluator) -> None:
        self.run_id = run_id
        self.launcher = TrainerLauncher()
        self._host = RunHost(store, run_id, launcher=self.launcher, evaluator=evaluator)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drive, name=f"run-{run_id}", daemon=True)

    def _drive(self) -> None:
        try:
            self._host.drive()
        except BaseException as exc:  # kept for ``result``; the trainer's thread raises nothing
            self._error = exc
        finally:
            self.launcher.started.set()  # a Host that failed early must not hang ``start``

    def start(self) -> TrainerAgent:
        """Start the Host; the model's Agent once the Session is open."""
        self._thread.start()
        if not self.launcher.started.wait(START_TIMEOUT_S) or self.launcher.agent is None:
            raise RuntimeError(f"the Run {self.run_id} did not start: {self._error!r}")
        return self.launcher.agent

    def result(self) -> tuple[RunState, BaseException | None]:
        """End the model's turn if it has not ended, wait for the Host to conclude (Validation,
        Assessment) and return the final state with the Host's error, if it had one."""
        if self.launcher.agent is not None:
            self.launcher.agent.end()
        self._thread.join()
        return self._host.state, self._error
