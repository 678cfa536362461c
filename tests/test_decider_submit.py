"""The Agent's submit in the Run decider: each rejection code in its order, and the budget
reserved before evaluation, never refunded after a fault (DESIGN §4.2).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import pytest

from evopolicygym.records.events import EvaluationStarted, SubmissionRejected
from evopolicygym.run.decider import CompleteEvaluation, FailEvaluation, Submit, decide
from tests.support.decider import DA, DB, DC, P0, Run, episodes_for, reopened


@pytest.mark.parametrize(
    "selector",
    ["", "   ", "x", "1:", ":3", "3:3", "4:2", "2,1", "0:3,2", "1,1", "-1", "1,,2", "1:2:3", "0x3"],
)
def test_invalid_request_for_a_bad_selector(selector: str) -> None:
    run = Run(episode_budget=8)
    rejection = run.reject(run.submit_cmd(selector), "invalid_request")
    assert rejection.message.startswith("--episodes: ")
    assert isinstance(rejection.event, SubmissionRejected)
    assert rejection.event.selector == selector


def test_invalid_request_for_an_index_outside_the_pool() -> None:
    run = Run(episode_budget=8, episode_pool_size=4)
    run.reject(run.submit_cmd("4"), "invalid_request")
    run.reject(run.submit_cmd("0,5"), "invalid_request")
    run.reject(run.submit_cmd("2:5"), "invalid_request")
    assert run.submit("3").indices == [3]  # the last index of the pool is fine


def test_the_long_selector_is_kept_truncated_in_the_rejection() -> None:
    run = Run(episode_budget=8)
    selector = "1," * 600
    rejection = run.reject(run.submit_cmd(selector), "invalid_request")
    assert isinstance(rejection.event, SubmissionRejected)
    assert rejection.event.selector == selector[:1000]


@pytest.mark.parametrize(
    ("digest", "problem"), [(None, None), (None, "no policy.py"), (DA, "a symlink in the tree")]
)
def test_program_invalid(digest: str | None, problem: str | None) -> None:
    run = Run(episode_budget=4)
    rejection = run.reject(run.submit_cmd("0", digest, problem), "program_invalid")
    if problem is not None:
        assert problem in rejection.message


def test_episode_limit() -> None:
    run = Run(episode_budget=10, episode_pool_size=8, max_episodes_per_submission=3)
    run.reject(run.submit_cmd("0:4"), "episode_limit")
    run.reject(run.submit_cmd("0,2,4,6"), "episode_limit")
    assert run.submit("0:3").budget_reserved == 3


def test_submission_limit() -> None:
    run = Run(episode_budget=10, max_submissions=2)
    run.publish("0")
    run.publish("0", DB)
    assert run.state.budget_left == 8
    run.reject(run.submit_cmd("1", DC), "submission_limit")


def test_budget_exhausted() -> None:
    run = Run(episode_budget=3, episode_pool_size=4)
    run.publish("0:3")
    assert run.state.budget_left == 0
    run.reject(run.submit_cmd("3", DB), "budget_exhausted")


def test_budget_allocation_for_too_many_episodes() -> None:
    run = Run(episode_budget=5, episode_pool_size=8)
    run.publish("0:3")
    run.reject(run.submit_cmd("0:3", DB), "budget_allocation")
    assert run.submit("0:2", DB).budget_used == 5


def test_budget_allocation_when_the_budget_could_never_be_spent() -> None:
    # 2 submissions of at most 3 Episodes must spend all 6: each one must take 3
    run = Run(
        episode_budget=6,
        max_submissions=2,
        max_episodes_per_submission=3,
        finish_budget_policy="require_budget_exhaustion",
    )
    rejection = run.reject(run.submit_cmd("0:2"), "budget_allocation")
    assert "could never be spent" in rejection.message
    run.publish("0:3")
    run.reject(run.submit_cmd("0", DB), "budget_allocation")
    run.publish("3:6", DB)
    assert run.state.budget_left == 0


def test_budget_allocation_allows_every_split_that_can_still_be_spent() -> None:
    run = Run(
        episode_budget=6,
        max_submissions=3,
        max_episodes_per_submission=3,
        finish_budget_policy="require_budget_exhaustion",
    )
    run.publish("0")  # 5 left for 2 more submissions of at most 3: possible
    run.reject(run.submit_cmd("1", DB), "budget_allocation")  # 4 left for 1 of at most 3
    run.publish("1:3", DB)  # 3 left for 1 of at most 3: possible
    run.publish("0:3", DC)
    assert run.state.budget_left == 0
    run.accept(run.finish_cmd(1, 2, 3))


def test_allow_early_takes_any_split() -> None:
    run = Run(episode_budget=6, max_submissions=2, max_episodes_per_submission=3)
    run.publish("0")
    run.accept(run.finish_cmd(1))


def test_duplicate_submission_same_program_same_episodes() -> None:
    run = Run(episode_budget=12, episode_pool_size=6)
    first = run.publish("0:2", DA)
    rejection = run.reject(run.submit_cmd("0,1", DA), "duplicate_submission")
    assert f"Submission {first}" in rejection.message
    run.publish("0:3", DA)  # a different index set is allowed
    run.publish("0:2", DB)  # another program on the same Episodes too
    run.reject(run.submit_cmd("0:3", DA), "duplicate_submission")


def test_duplicate_submission_is_checked_after_the_limits() -> None:
    run = Run(episode_budget=2, episode_pool_size=4)
    run.publish("0:2", DA)
    run.reject(run.submit_cmd("0:2", DA), "budget_exhausted")


def test_a_failed_evaluation_does_not_count_as_a_duplicate() -> None:
    run = Run(episode_budget=8)
    run.submit("0:2", DA)
    run.fail()
    # A failed evaluation closes the session, so the rule is only visible white box.
    state = reopened(run.state)
    decision = decide(state, Submit(request_id="r", selector="0:2", program_digest=DA))
    assert isinstance(decision, list)
    (started,) = decision
    assert isinstance(started, EvaluationStarted)
    assert (started.submission_id, started.budget_used) == (2, 4)


def test_budget_is_reserved_when_the_evaluation_starts() -> None:
    run = Run(episode_budget=10, episode_pool_size=6)
    started = run.submit("0:2,4", DA)
    assert started.indices == [0, 1, 4]
    assert (started.budget_reserved, started.budget_used) == (3, 3)
    assert started.parent_program_digest == P0
    assert run.state.budget_used == 3 and run.state.budget_left == 7
    published = run.complete(score=2.5, failures=1)
    assert (published.budget_used, published.budget_left) == (3, 7)
    assert published.program_digest == DA
    assert (published.score, published.failures) == (2.5, 1)
    started = run.submit("5", DB)
    assert (started.submission_id, started.budget_used) == (2, 4)
    assert started.parent_program_digest == DA
    published = run.complete()
    assert (published.budget_used, published.budget_left) == (4, 6)


def test_budget_is_kept_after_an_evaluation_failure() -> None:
    run = Run(episode_budget=10, episode_pool_size=6)
    run.publish("0", DA)
    run.submit("1:4", DB)
    failed = run.fail()
    assert failed.budget_consumed == 3
    assert run.state.budget_used == 4
    assert [s.status for s in run.state.submissions] == ["published", "failed"]


def test_a_rejection_consumes_nothing() -> None:
    run = Run(episode_budget=3)
    run.publish("0:2", DA)
    before = run.state
    run.reject(run.submit_cmd("0:2", DB), "budget_allocation")
    run.reject(run.submit_cmd("0:2", DA), "budget_allocation")
    assert run.state.budget_used == before.budget_used == 2
    assert run.state.version == before.version + 2


def test_complete_evaluation_must_run_the_reserved_episodes() -> None:
    run = Run(episode_budget=10)
    run.submit("0:3")
    for episodes in ([0, 1], [0, 2, 1], [0, 1, 2, 3]):
        run.reject(
            CompleteEvaluation(
                submission_id=1, episodes=episodes_for(episodes), score=0.0, failures=0
            ),
            "invalid_request",
        )
    run.reject(
        CompleteEvaluation(submission_id=2, episodes=episodes_for([0, 1, 2]), score=0, failures=0),
        "invalid_request",
    )
    run.reject(FailEvaluation(submission_id=2, error="x"), "invalid_request")
    run.complete()
    run.reject(FailEvaluation(submission_id=1, error="x"), "invalid_request")
