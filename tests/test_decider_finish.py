"""The Agent's finish in the Run decider: candidates only from an accepted finish, checked in
a fixed order (DESIGN §4.2).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import pytest

from evopolicygym.run.config import ValidationConfig
from evopolicygym.run.decider import Finish, Rejection, decide
from tests.support.decider import DA, DB, DC, Run, reopened


def test_a_finish_with_no_ids_is_invalid_and_with_a_repeated_id_a_duplicate() -> None:
    """duplicate_submission is the same id twice in one finish, as the protocol has it."""
    run = Run(episode_budget=8)
    first = run.publish("0")
    second = run.publish("1", DB)
    run.reject(run.finish_cmd(), "invalid_request")
    run.reject(run.finish_cmd(first, first), "duplicate_submission")
    run.reject(run.finish_cmd(first, second, first), "duplicate_submission")
    run.accept(run.finish_cmd(second, first))
    assert run.state.finish_candidates == (second, first)


def test_candidate_limit() -> None:
    run = Run(episode_budget=8, validation=ValidationConfig(max_candidates=2))
    for digest in (DA, DB, DC):
        run.publish("0", digest)
    run.reject(run.finish_cmd(1, 2, 3), "candidate_limit")
    run.accept(run.finish_cmd(3, 1))


@pytest.mark.parametrize("candidate", [0, -1, 3, 99])
def test_unknown_submission_for_an_unknown_id(candidate: int) -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.publish("1", DB)
    run.reject(run.finish_cmd(1, candidate), "unknown_submission")


def test_unknown_submission_for_a_failed_evaluation() -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.submit("1", DB)
    run.fail()
    # A failed evaluation closes the session, so the rule is only visible white box.
    state = reopened(run.state)
    decision = decide(state, Finish(request_id="r", candidates=[1, 2]))
    assert isinstance(decision, Rejection)
    assert decision.code == "unknown_submission"
    assert isinstance(decide(state, Finish(request_id="r", candidates=[1])), list)


def test_finish_naming_a_pending_submission_is_refused() -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.submit("1", DB)
    # the pending check comes first, so this is invalid_request, not unknown_submission
    run.reject(run.finish_cmd(1, 2), "invalid_request")
    run.complete()
    run.accept(run.finish_cmd(1, 2))


def test_budget_remaining() -> None:
    run = Run(episode_budget=4, finish_budget_policy="require_budget_exhaustion")
    run.publish("0:2", DA)
    rejection = run.reject(run.finish_cmd(1), "budget_remaining")
    assert "2 Episodes" in rejection.message
    run.publish("2:4", DB)
    run.accept(run.finish_cmd(2, 1))


def test_finish_is_checked_in_order_candidate_limit_then_unknown_then_budget() -> None:
    run = Run(
        episode_budget=4,
        finish_budget_policy="require_budget_exhaustion",
        validation=ValidationConfig(max_candidates=1),
    )
    run.publish("0", DA)
    run.reject(run.finish_cmd(1, 7), "candidate_limit")
    run.reject(run.finish_cmd(7), "unknown_submission")
    run.reject(run.finish_cmd(1), "budget_remaining")
