"""The experiment's rules per cell (``experiments.decider``), by example and by property.

The property: a cell driven by ``next_step`` through Runs that end with any reasons,
with crashes between any two writes and interrupted carries, ends exactly as a crash-free
drive with the same Run outcomes: the same attempts, the same final outcome; no Run that
no attempt names, at most ``retries`` retries, each after a fault only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.experiments.decider import OUTCOMES, RETRYABLE, Attempt, RunFacts, Step, next_step

REASONS = sorted(OUTCOMES | RETRYABLE | {"interrupted"})


def test_examples() -> None:
    assert next_step([], None, 1) == Step("assign", 1)
    assigned = [Attempt("r1", 1)]
    assert next_step(assigned, RunFacts(exists=False), 1) == Step("create", 1, "r1")
    assert next_step(assigned, RunFacts(exists=True), 1) == Step("carry", 1, "r1")
    assert next_step(assigned, RunFacts(True, "agent_failed"), 1) == Step(
        "record_end", 1, "r1", "agent_failed"
    )
    assert next_step([Attempt("r1", 1, "finished")], None, 1) == Step("done", 1, "r1", "finished")
    assert next_step([Attempt("r1", 1, "budget_exhausted")], None, 0) == Step(
        "done", 1, "r1", "budget_exhausted"
    )
    assert next_step([Attempt("r1", 1, "agent_exited")], None, 5).kind == "done"
    failed = [Attempt("r1", 1, "evaluation_failed", retryable=True)]
    assert next_step(failed, None, 1) == Step("assign", 2)
    assert next_step(failed, None, 0) == Step("failed", 1, "r1", "evaluation_failed")
    twice = [*failed, Attempt("r2", 2, "agent_failed", retryable=True)]
    assert next_step(twice, None, 1) == Step("failed", 2, "r2", "agent_failed")
    assert next_step(twice, None, 2) == Step("assign", 3)  # a later invocation with more retries
    assert next_step([Attempt("r1", 1, "create_failed")], None, 3).kind == "failed"
    with pytest.raises(ValueError, match="retries"):
        next_step([], None, -1)


@dataclass
class World:
    """The stream's attempts and the Runs' own streams of one cell."""

    attempts: list[Attempt] = field(default_factory=list)
    runs: dict[str, str | None] = field(default_factory=dict)  # run id -> terminal reason
    made: int = 0

    def facts(self) -> RunFacts | None:
        if not self.attempts or self.attempts[-1].outcome is not None:
            return None
        run_id = self.attempts[-1].run_id
        return RunFacts(exists=run_id in self.runs, terminal_reason=self.runs.get(run_id))


def drive(
    outcomes: list[str], retries: int, crashes: list[bool], stalls: list[bool]
) -> tuple[World, Step]:
    """Drive one cell to its end. ``outcomes``: how successive Runs end; ``crashes``: whether
    the process dies between the two writes of an assign (CellRunAssigned, then the Run);
    ``stalls``: whether a carry is interrupted (the Run goes on at the next carry)."""
    world, next_outcome = World(), iter(outcomes)
    crash, stall = iter(crashes), iter(stalls)
    for _ in range(1000):
        step = next_step(world.attempts, world.facts(), retries)
        if step.kind in ("done", "failed"):
            return world, step
        if step.kind == "assign":
            world.made += 1
            run_id = f"run{world.made}"
            world.attempts.append(Attempt(run_id, step.attempt))
            if next(crash, False):
                continue  # died before creating it: the next step creates it
            world.runs[run_id] = None
        elif step.kind == "create":
            assert step.run_id not in world.runs
            world.runs[step.run_id or ""] = None
        elif step.kind == "carry":
            if next(stall, False):
                continue
            world.runs[step.run_id or ""] = next(next_outcome, "finished")
        elif step.kind == "record_end":
            last = world.attempts[-1]
            assert step.outcome is not None and world.runs[last.run_id] == step.outcome
            world.attempts[-1] = Attempt(
                last.run_id, last.attempt, step.outcome, step.outcome in RETRYABLE
            )
    raise AssertionError("the cell never settled")


@settings(max_examples=300, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from(REASONS), min_size=1, max_size=6),
    retries=st.integers(min_value=0, max_value=4),
    crashes=st.lists(st.booleans(), max_size=8),
    stalls=st.lists(st.booleans(), max_size=8),
)
def test_crashes_change_nothing_and_retries_follow_faults(
    outcomes: list[str], retries: int, crashes: list[bool], stalls: list[bool]
) -> None:
    world, step = drive(outcomes, retries, crashes, stalls)
    calm, calm_step = drive(outcomes, retries, [], [])
    assert [(a.attempt, a.outcome) for a in world.attempts] == [
        (a.attempt, a.outcome) for a in calm.attempts
    ]
    assert (step.kind, step.outcome) == (calm_step.kind, calm_step.outcome)
    # No orphan: every Run is named by an attempt, and each attempt's Run exists.
    assert set(world.runs) == {a.run_id for a in world.attempts}
    assert [a.attempt for a in world.attempts] == list(range(1, len(world.attempts) + 1))
    assert len(world.attempts) <= retries + 1
    assert all(a.retryable for a in world.attempts[:-1])  # a retry follows a fault only
    last = world.attempts[-1]
    if step.kind == "done":
        assert last.outcome in OUTCOMES
    else:
        assert last.outcome not in OUTCOMES
        assert not last.retryable or last.attempt == retries + 1
    # The outcomes drawn (then "finished"): the cell's Runs ended as they came, up to the
    # first that is not a fault or the last retry.
    expected = []
    for outcome in [*outcomes, "finished"]:
        expected.append(outcome)
        if outcome not in RETRYABLE or len(expected) == retries + 1:
            break
    assert [a.outcome for a in world.attempts] == expected
