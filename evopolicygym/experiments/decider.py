"""The experiment's rules, as pure functions: what each cell needs next.

Given a cell's attempts as its stream tells them (``Attempt``), what its current Run's
own stream says (``RunFacts``) and the invocation's ``retries``, ``next_step`` says
whether the cell is done, must be recorded as ended, needs its assigned Run created,
carried on, or a new Run assigned. The runner applies the steps; re-running the same
experiment after a crash at any point folds the same facts and so takes the same steps.

Outcomes: ``finished``, ``agent_exited`` and ``budget_exhausted`` are what an agent
did (a result, never retried). ``agent_failed`` (the Agent could not run: an API
error, a crash) and the Host's ``evaluation_failed``, ``validation_failed`` and
``assessment_failed`` are faults: the cell gets a new Run while it has had at most
``retries`` retries. ``create_failed`` (the Run could not be created) and a RunFinished
``interrupted`` are failures that are not retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "OUTCOMES",
    "RETRYABLE",
    "Attempt",
    "RunFacts",
    "Step",
    "StepKind",
    "is_retryable",
    "next_step",
]

OUTCOMES = frozenset({"finished", "agent_exited", "budget_exhausted"})
RETRYABLE = frozenset(
    {"agent_failed", "evaluation_failed", "validation_failed", "assessment_failed"}
)


def is_retryable(outcome: str) -> bool:
    """Whether a Run that ended so was ended by a fault (worth another Run), not by its agent."""
    return outcome in RETRYABLE


@dataclass(frozen=True)
class Attempt:
    """One Run assigned to a cell, as the experiment stream tells it."""

    run_id: str
    attempt: int
    outcome: str | None = None  # None until its CellRunEnded is recorded
    retryable: bool = False


@dataclass(frozen=True)
class RunFacts:
    """What a Run's own stream says: whether it exists and, if it ended, why."""

    exists: bool
    terminal_reason: str | None = None  # the RunFinished reason; None while it has none


StepKind = Literal["assign", "create", "carry", "record_end", "done", "failed"]


@dataclass(frozen=True)
class Step:
    """What a cell needs next.

    - ``assign``: a new Run (attempt ``attempt``): record CellRunAssigned, then create it;
    - ``create``: the assigned Run ``run_id`` has no stream yet: create it with that id;
    - ``carry``: the Run exists and has not ended: carry it on (resume it from its log);
    - ``record_end``: the Run ended (``outcome``) but the experiment has not recorded it;
    - ``done``: the cell's current Run ended with an outcome (``OUTCOMES``);
    - ``failed``: a fault ended it and no retry is left, or it could not be created.
    """

    kind: StepKind
    attempt: int
    run_id: str | None = None
    outcome: str | None = None


def next_step(attempts: list[Attempt], run: RunFacts | None, retries: int) -> Step:
    """The cell's next step. ``attempts`` in order; ``run``: the facts of the last attempt's
    Run (None where there is no attempt); ``retries``: new Runs allowed after a fault."""
    if retries < 0:
        raise ValueError("retries must be >= 0")
    if not attempts:
        return Step("assign", 1)
    last = attempts[-1]
    if last.outcome is None:
        if run is None or not run.exists:
            return Step("create", last.attempt, last.run_id)
        if run.terminal_reason is None:
            return Step("carry", last.attempt, last.run_id)
        return Step("record_end", last.attempt, last.run_id, run.terminal_reason)
    if last.outcome in OUTCOMES:
        return Step("done", last.attempt, last.run_id, last.outcome)
    if last.retryable and last.attempt <= retries:  # attempt N is the (N-1)th retry
        return Step("assign", last.attempt + 1)
    return Step("failed", last.attempt, last.run_id, last.outcome)
