"""The Run's Host: ``RunHost.drive`` folds a Run's stream and carries it to the end.

Each turn asks the decider for the next step and has it carried out: start the
Agent and serve its Session (``supervisor``, ``gateway``), evaluate submissions,
validate, assess (``phases``), conclude. Every change is decide → append → evolve
(``ledger``). Resuming is the same call on a stream that already has events: the
gap is recorded (RunInterrupted, RunResumed) and the Run carries on.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from evopolicygym.evaluation import Evaluator
from evopolicygym.records.events import Event
from evopolicygym.records.location import Store
from evopolicygym.run.decider import (
    Assess,
    Conclude,
    Evaluate,
    Interrupt,
    Resume,
    RunState,
    StartAgent,
    StopAgent,
    Validate,
    next_step,
)
from evopolicygym.run.gateway import SessionGateway
from evopolicygym.run.launcher import Launcher
from evopolicygym.run.ledger import HostFault, Ledger, OnChange, RunError, Stopping
from evopolicygym.run.liveness import run_lock
from evopolicygym.run.phases import Phases, recorded_benchmark, recorded_pool
from evopolicygym.run.publisher import Publisher
from evopolicygym.run.supervisor import AgentSupervisor

__all__ = ["RunHost"]


class RunHost:
    """Carries one Run forward from whatever its log says, starting Agents through ``launcher``."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        launcher: Launcher,
        workspace: Path | None = None,
        on_change: OnChange | None = None,
        evaluator: Evaluator | None = None,
    ) -> None:
        """``evaluator`` plays the Run's Episodes (its maker closes it; a Ray one places them
        on a cluster); default: a local one, made and closed by ``drive``."""
        self.store = store
        self._evaluator = evaluator
        self.run_id = run_id
        self._ledger = Ledger(store, run_id, on_change=on_change)
        self._publisher = Publisher(self._ledger, workspace)
        self._supervisor = AgentSupervisor(self._ledger, self._publisher, launcher)

    @property
    def state(self) -> RunState:
        return self._ledger.state

    @property
    def events(self) -> list[Event]:
        """The Run's events as folded so far."""
        return list(self._ledger.events)

    @property
    def workspace(self) -> Path | None:
        return self._publisher.path

    def stop(self) -> None:
        """Say the Host is stopping (from a signal handler, before its KeyboardInterrupt): what
        fails from now on, in any thread, is the stop's and is not recorded as a failure."""
        self._ledger.stopping = True

    def drive(self) -> RunState:
        """Carry the Run to its end (or until interrupted) and return its final state."""
        ledger = self._ledger
        with run_lock(self.store, self.run_id):
            state = ledger.load()
            if state.finished is not None:
                return state
            benchmark = recorded_benchmark(ledger)
            pool = recorded_pool(ledger)  # read back as recorded, never planned again
            if state.version > 1:  # someone carried it before: record the gap
                if not state.interrupted:
                    ledger.must(
                        Interrupt(
                            reason="the Host stopped without finishing the Run",
                            last_position=self.store.events.head(),
                        )
                    )
                ledger.must(Resume())
                # The attempt the Host died under: its CLI's record is still on disk.
                self._supervisor.recover_session(self._publisher.known_path())
            evaluator = self._evaluator or Evaluator()
            evaluator.warm()  # its fork server starts while the Agent does
            phases = Phases(ledger, benchmark, evaluator, self._publisher, pool)
            gateway = SessionGateway(ledger, self._supervisor, phases.evaluate_submission)
            try:
                self._loop(phases, gateway)
            except (KeyboardInterrupt, Stopping):
                self._ledger.stopping = True
                with contextlib.suppress(Exception):
                    ledger.apply(
                        Interrupt(
                            reason="interrupted by a signal", last_position=self.store.events.head()
                        )
                    )
                raise KeyboardInterrupt from None
            except HostFault as fault:
                with contextlib.suppress(Exception):  # where the store still takes it
                    ledger.apply(
                        Interrupt(reason=fault.what, last_position=self.store.events.head())
                    )
                raise
            finally:
                if evaluator is not self._evaluator:
                    evaluator.close()
                self._publisher.cleanup()
            return ledger.state

    def _loop(self, phases: Phases, gateway: SessionGateway) -> None:
        while True:
            step = next_step(self._ledger.state)
            match step:
                case Conclude():
                    if self._ledger.state.finished is None:
                        self._ledger.must(Conclude())
                    return
                case Evaluate():
                    phases.evaluate_submission(step)
                case StartAgent():
                    self._supervisor.run(gateway.handle)
                case StopAgent():
                    # Only reachable on resume with an Agent recorded as running; Resume records
                    # its exit, so this is a bug if it happens.
                    raise RunError("internal: an Agent is recorded as running with no process")
                case Validate():
                    phases.validate(step)
                case Assess():
                    phases.assess(step)
                case _:
                    raise RunError(f"internal: unexpected step {step!r}")
