"""``evolve`` refuses what the rules could not have produced: events ``decide`` never answers
with, and events only a forged log holds (checked against what ``decide`` would give).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.run.config import AssessmentConfig, ValidationConfig
from evopolicygym.run.decider import (
    CompleteAssessment,
    InvalidTransition,
    RecordCandidate,
    RunState,
    StartAgent,
    StartAssessment,
    StartValidation,
    evolve,
    fold,
)
from tests.support.decider import DA, DB, DC, Run, evaluation_started


def agent_phase_state() -> RunState:
    """An Agent holding the session, with Submission 1 published (1 of 8 Episodes used)."""
    run = Run(episode_budget=8, episode_pool_size=4)
    run.accept(StartAgent())
    run.publish("0", DA)
    return run.state


def pending_state() -> RunState:
    run = Run(episode_budget=8)
    run.submit("0", DA)
    return run.state


def closed_state() -> RunState:
    """The Agent finished with Submission 1 (of 8 Episodes, 1 used) and is still running."""
    run = Run(episode_budget=8, episode_pool_size=4)
    run.accept(StartAgent())
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    return run.state


def two_published_state(**kwargs: Any) -> RunState:
    run = Run(episode_budget=8, **kwargs)
    run.publish("0", DA, score=1.0)
    run.publish("1", DB, score=2.0)
    return run.state


def validating_state() -> RunState:
    """Validation of candidates (1, 2) started, none recorded yet."""
    run = Run(episode_budget=8)
    run.publish("0", DA, score=1.0)
    run.publish("1", DB, score=2.0)
    run.accept(run.finish_cmd(1, 2))
    run.accept(StartValidation())
    return run.state


def selected_state(**kwargs: Any) -> RunState:
    """Submission 1 validated and selected; the next step is Assessment or Conclude."""
    run = Run(episode_budget=8, **kwargs)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    return run.state


def last_candidate_validated_state() -> RunState:
    """The last candidate's CandidateValidated folded, its FinalSubmissionSelected not yet."""
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    return evolve(run.state, CandidateValidated(submission_id=1, score=1.0, failures=0))


def assessed_state() -> RunState:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=1.0, failures=0))
    return run.state


Case = tuple[str, Callable[[], RunState], Event]


EVOLVE_REFUSES: list[Case] = [
    (
        "RunFinished while the Agent holds the session",
        agent_phase_state,
        RunFinished(reason="finished", final_submission_id=1),
    ),
    (
        "RunFinished with another reason than the rules'",
        assessed_state,
        RunFinished(reason="agent_exited", final_submission_id=1),
    ),
    ("ValidationFailed with no Validation running", agent_phase_state, ValidationFailed(error="x")),
    ("AssessmentFailed with no Assessment running", agent_phase_state, AssessmentFailed(error="x")),
    (
        "AssessmentCompleted twice",
        assessed_state,
        AssessmentCompleted(submission_id=1, score=2.0, failures=0),
    ),
    (
        "FinalSubmissionSelected while the Agent holds the session",
        agent_phase_state,
        FinalSubmissionSelected(submission_id=1, program_digest=DA, score=1.0),
    ),
    (
        "FinalSubmissionSelected before every candidate was validated",
        validating_state,
        FinalSubmissionSelected(submission_id=2, program_digest=DB, score=1.0),
    ),
    (
        "FinishAccepted naming an unknown Submission",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[7]),
    ),
    (
        "FinishAccepted naming a pending Submission",
        pending_state,
        FinishAccepted(request_id="r", candidates=[1]),
    ),
    ("EvaluationStarted outside the pool", agent_phase_state, evaluation_started(2, [4], 2)),
    (
        "EvaluationStarted with decreasing indices",
        agent_phase_state,
        evaluation_started(2, [2, 1], 3),
    ),
    (
        "EvaluationStarted over the episode limit",
        lambda: two_published_state(episode_pool_size=4, max_episodes_per_submission=2),
        evaluation_started(3, [0, 1, 2], 5),
    ),
    (
        "EvaluationStarted over the submission limit",
        lambda: two_published_state(max_submissions=2),
        evaluation_started(3, [2], 3, DC),
    ),
    ("EvaluationStarted after the session closed", closed_state, evaluation_started(2, [1], 2)),
    (
        "SubmissionPublished with a wrong budget_left",
        pending_state,
        SubmissionPublished(
            submission_id=1, program_digest=DA, score=0.0, failures=0, budget_used=1, budget_left=0
        ),
    ),
    (
        "RunInterrupted twice",
        lambda: fold([RunInterrupted(reason="x")], agent_phase_state()),
        RunInterrupted(reason="y"),
    ),
    ("RunResumed without RunInterrupted", agent_phase_state, RunResumed(attempt=1)),
    (
        "RunResumed skipping an attempt",
        lambda: fold([RunInterrupted(reason="x")], agent_phase_state()),
        RunResumed(attempt=5),
    ),
]


@pytest.mark.parametrize(
    ("state_of", "event"),
    [(state_of, event) for _, state_of, event in EVOLVE_REFUSES],
    ids=[name for name, _, _ in EVOLVE_REFUSES],
)
def test_evolve_refuses_events_decide_never_produces(
    state_of: Callable[[], RunState], event: Event
) -> None:
    with pytest.raises(InvalidTransition):
        evolve(state_of(), event)


EVOLVE_GAPS: list[Case] = [
    (
        "FinishAccepted naming no Submission",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[]),
    ),
    (
        "FinishAccepted naming a Submission twice",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[1, 1]),
    ),
    (
        "FinishAccepted over max_candidates",
        lambda: two_published_state(validation=ValidationConfig(max_candidates=1)),
        FinishAccepted(request_id="r", candidates=[1, 2]),
    ),
    (
        "FinishAccepted with budget left under require_budget_exhaustion",
        lambda: two_published_state(finish_budget_policy="require_budget_exhaustion"),
        FinishAccepted(request_id="r", candidates=[1]),
    ),
    (
        "EvaluationStarted for a duplicate submission",
        agent_phase_state,
        evaluation_started(2, [0], 2, DA),
    ),
    (
        "EvaluationStarted leaving the budget unspendable under require_budget_exhaustion",
        lambda: (
            Run(
                episode_budget=6,
                max_submissions=2,
                max_episodes_per_submission=3,
                finish_budget_policy="require_budget_exhaustion",
            ).state
        ),
        evaluation_started(1, [0], 1),
    ),
    (
        "EvaluationStarted with a parent that is not the latest program",
        agent_phase_state,
        msgspec.structs.replace(evaluation_started(2, [1], 2), parent_program_digest="sha256:zz"),
    ),
    (
        "EpisodeCompleted for an Episode that was not reserved",
        pending_state,
        EpisodeCompleted(submission_id=1, index=5, status="ok", total_reward=0.0, steps=1),
    ),
    (
        "AgentStarted after the session closed",
        lambda: fold([AgentExited(attempt=1, exit_code=0)], closed_state()),
        AgentStarted(attempt=2),
    ),
    (
        "AgentMessages before any Agent started",
        lambda: Run(episode_budget=2).state,
        AgentMessages(attempt=0, chunk=0, messages=[]),
    ),
    (
        "ValidationStarted on other candidates than the finish named",
        lambda: fold([FinishAccepted(request_id="r", candidates=[1])], two_published_state()),
        ValidationStarted(candidates=[2], split="validation", episodes=16, seed=2),
    ),
    (
        "FinalSubmissionSelected with another program digest",
        last_candidate_validated_state,
        FinalSubmissionSelected(submission_id=1, program_digest="sha256:zz", score=1.0),
    ),
    (
        "AssessmentStarted when Assessment is disabled",
        lambda: selected_state(assessment=AssessmentConfig(enabled=False)),
        AssessmentStarted(submission_id=1, split="assessment", episodes=32, seed=3),
    ),
    (
        "RunFinished naming another final Submission",
        lambda: selected_state(assessment=AssessmentConfig(enabled=False)),
        RunFinished(reason="finished", final_submission_id=7),
    ),
]


@pytest.mark.parametrize(
    ("state_of", "event"),
    [(state_of, event) for _, state_of, event in EVOLVE_GAPS],
    ids=[name for name, _, _ in EVOLVE_GAPS],
)
def test_evolve_refuses_what_only_a_forged_log_holds(
    state_of: Callable[[], RunState], event: Event
) -> None:
    """evolve() checks an event against what decide() would have produced in that state."""
    with pytest.raises(InvalidTransition):
        evolve(state_of(), event)
