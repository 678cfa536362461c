"""The Agent's session in the Run decider: every refusal has a stable, documented code, and
nothing is taken once the session is closed (DESIGN §4.2).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import pytest

from evopolicygym.run.decider import (
    REJECTION_CODES,
    AgentExit,
    Command,
    Finish,
    Rejection,
    RunState,
    StartAgent,
    Submit,
    decide,
    evolve,
)
from tests.support.decider import DA, DB, Run, finished_state


def test_rejection_codes_are_documented() -> None:
    assert set(REJECTION_CODES) >= {
        "invalid_request",
        "episode_limit",
        "submission_limit",
        "budget_exhausted",
        "budget_allocation",
        "program_invalid",
        "candidate_limit",
        "duplicate_submission",
        "unknown_submission",
        "budget_remaining",
        "session_closed",
    }
    assert all(message for message in REJECTION_CODES.values())


@pytest.mark.parametrize("when", ["not created", "finished"])
@pytest.mark.parametrize(
    "command",
    [
        Submit(request_id="late", selector="0", program_digest=DA),
        Finish(request_id="late", candidates=[1]),
    ],
    ids=["submit", "finish"],
)
def test_session_closed_when_there_is_no_live_run(when: str, command: Command) -> None:
    """No stream to record on: the rejection carries no event (one would never fold)."""
    state = RunState() if when == "not created" else finished_state()
    decision = decide(state, command)
    assert isinstance(decision, Rejection)
    assert decision.code == "session_closed"
    if decision.event is not None:  # if one is kept after all, it must fold
        assert evolve(state, decision.event).version == state.version + 1


def test_session_closed_after_finish() -> None:
    run = Run(episode_budget=4)
    first = run.publish("0:2")
    run.accept(run.finish_cmd(first))
    assert not run.state.authority_open
    run.reject(run.submit_cmd("2:4", DB), "session_closed")
    run.reject(run.finish_cmd(first), "session_closed")


def test_session_closed_after_the_agent_exits() -> None:
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.publish("0")
    run.accept(AgentExit(exit_code=0))
    run.reject(run.submit_cmd("1", DB), "session_closed")
    run.reject(run.finish_cmd(1), "session_closed")


def test_session_closed_after_an_evaluation_failure() -> None:
    run = Run(episode_budget=4)
    run.submit("0")
    run.fail()
    run.reject(run.submit_cmd("1", DB), "session_closed")
    run.reject(run.finish_cmd(1), "session_closed")


def test_session_closed_wins_over_every_other_problem() -> None:
    run = Run(episode_budget=2)
    run.publish("0")
    run.accept(run.finish_cmd(1))
    run.reject(run.submit_cmd("junk", None, problem="no policy.py"), "session_closed")
    run.reject(run.finish_cmd(), "session_closed")


def test_invalid_request_while_a_submission_is_being_evaluated() -> None:
    run = Run(episode_budget=8)
    run.submit("0")
    run.reject(run.submit_cmd("1", DB), "invalid_request")
    # naming the pending one (or anything) in a finish waits for its evaluation too
    run.reject(run.finish_cmd(1), "invalid_request")
