"""A Run's life in the decider, end to end: the Agent finishes, exits or fails; an evaluation
fails; the Host crashes and resumes; terminal reasons (DESIGN §4.2).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import pytest

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateValidated,
    EvaluationFailed,
    FinalSubmissionSelected,
    FinishAccepted,
    RunFinished,
    RunInterrupted,
    RunResumed,
    ValidationStarted,
)
from evopolicygym.run.config import AssessmentConfig, ValidationConfig
from evopolicygym.run.decider import (
    HOST_INTERRUPTED,
    AgentExit,
    Assess,
    CompleteAssessment,
    Conclude,
    Evaluate,
    FailAssessment,
    FailValidation,
    Interrupt,
    RecordCandidate,
    RecordMessages,
    Rejection,
    Resume,
    RunState,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    StopAgent,
    Validate,
    decide,
    next_step,
    terminal_reason,
)
from evopolicygym.transcript import Message
from tests.support.decider import DA, DB, DC, Run, validated_run


def test_full_lifecycle_finished() -> None:
    run = validated_run()
    assert next_step(run.state) == StopAgent()
    (messages,) = run.accept(RecordMessages(messages=[Message(role="assistant", content="hi")]))
    assert isinstance(messages, AgentMessages) and (messages.attempt, messages.chunk) == (1, 0)
    (accepted,) = run.accept(run.finish_cmd(1, 2, 3))
    assert isinstance(accepted, FinishAccepted) and accepted.candidates == [1, 2, 3]
    assert not run.state.authority_open
    assert next_step(run.state) == StopAgent()  # the Agent is still running
    run.reject(StartValidation(), "invalid_request")
    (exited,) = run.accept(AgentExit(exit_code=0, reason="done"))
    assert exited == AgentExited(attempt=1, exit_code=0, reason="done")
    assert next_step(run.state) == Validate(candidates=(1, 2, 3))
    run.reject(RecordCandidate(submission_id=1, score=0, failures=0), "invalid_request")
    run.reject(StartAssessment(), "invalid_request")
    run.reject(Conclude(), "invalid_request")
    run.reject(Select(), "invalid_request")  # Validation is enabled
    (started,) = run.accept(StartValidation())
    assert started == ValidationStarted(
        candidates=[1, 2, 3], split="validation", episodes=16, seed=2
    )
    run.reject(StartValidation(), "invalid_request")
    run.reject(RecordCandidate(submission_id=2, score=0, failures=0), "invalid_request")
    assert run.accept(RecordCandidate(submission_id=1, score=5.0, failures=0)) == [
        CandidateValidated(submission_id=1, score=5.0, failures=0)
    ]
    assert len(run.accept(RecordCandidate(submission_id=2, score=7.0, failures=1))) == 1
    assert next_step(run.state) == Validate(candidates=(1, 2, 3))
    last = run.accept(RecordCandidate(submission_id=3, score=7.0, failures=0))
    assert last[0] == CandidateValidated(submission_id=3, score=7.0, failures=0)
    selected = last[1]
    assert isinstance(selected, FinalSubmissionSelected)
    assert (selected.submission_id, selected.program_digest, selected.score) == (3, DC, 7.0)
    run.reject(RecordCandidate(submission_id=3, score=7.0, failures=0), "invalid_request")
    run.reject(FailValidation(error="late"), "invalid_request")
    assert next_step(run.state) == Assess(submission_id=3)
    run.reject(CompleteAssessment(score=1.0, failures=0), "invalid_request")
    (assessing,) = run.accept(StartAssessment())
    assert assessing == AssessmentStarted(submission_id=3, split="assessment", episodes=32, seed=3)
    run.reject(StartAssessment(), "invalid_request")
    run.reject(Conclude(), "invalid_request")
    (assessed,) = run.accept(CompleteAssessment(score=6.5, failures=0))
    assert isinstance(assessed, AssessmentCompleted) and assessed.submission_id == 3
    run.reject(FailAssessment(error="late"), "invalid_request")
    assert next_step(run.state) == Conclude()
    done = run.finished()
    assert done == RunFinished(
        reason="finished", final_submission_id=3, validation_score=7.0, assessment_score=6.5
    )
    for command in (Conclude(), StartAgent(), Resume(), Interrupt(reason="x"), StartValidation()):
        run.reject(command, "invalid_request")


@pytest.mark.parametrize(
    ("direction", "exit_code", "signal", "nominated", "reason"),
    [
        ("maximize", 0, None, (2, 3), "agent_exited"),
        ("minimize", 0, None, (1, 3), "agent_exited"),
        ("maximize", 1, None, (2, 3), "agent_failed"),
        ("maximize", None, 9, (2, 3), "agent_failed"),
        ("maximize", 0, 15, (2, 3), "agent_failed"),
    ],
)
def test_agent_exits_without_finishing(
    direction: str,
    exit_code: int | None,
    signal: int | None,
    nominated: tuple[int, ...],
    reason: str,
) -> None:
    run = validated_run(direction, validation=ValidationConfig(max_candidates=2))
    run.accept(AgentExit(exit_code=exit_code, signal=signal))
    assert not run.state.authority_open
    assert run.state.finish_candidates is None
    assert next_step(run.state) == Validate(candidates=nominated)
    run.accept(StartValidation())
    for candidate in nominated:
        run.accept(RecordCandidate(submission_id=candidate, score=1.0, failures=0))
    assert run.state.selected == nominated[0]
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=0.0, failures=0))
    assert terminal_reason(run.state) == reason
    assert run.finished().reason == reason


@pytest.mark.parametrize("exit_code", [0, 2])
def test_agent_exits_with_the_budget_spent(exit_code: int) -> None:
    run = Run(episode_budget=4, assessment=AssessmentConfig(enabled=False))
    run.accept(StartAgent())
    run.publish("0:2", DA, score=1.0)
    run.publish("2:4", DB, score=2.0)
    run.reject(run.submit_cmd("0", DC), "budget_exhausted")
    run.accept(AgentExit(exit_code=exit_code))
    assert next_step(run.state) == Validate(candidates=(2, 1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=2, score=1.0, failures=0))
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    done = run.finished()
    assert (done.reason, done.final_submission_id) == ("budget_exhausted", 2)


def test_a_finish_that_spent_the_whole_budget_is_finished() -> None:
    run = Run(
        episode_budget=4,
        finish_budget_policy="require_budget_exhaustion",
        assessment=AssessmentConfig(enabled=False),
    )
    run.accept(StartAgent())
    run.publish("0:2", DA, score=1.0)
    run.publish("2:4", DB, score=2.0)
    run.accept(run.finish_cmd(1))
    run.accept(AgentExit(exit_code=3))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    assert run.finished() == RunFinished(
        reason="finished", final_submission_id=1, validation_score=1.0
    )


def test_agent_exits_with_no_submission() -> None:
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.reject(run.finish_cmd(1), "unknown_submission")
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Conclude()
    run.reject(StartValidation(), "invalid_request")
    done = run.finished()
    assert done == RunFinished(reason="agent_exited")


def test_an_evaluation_failure_ends_the_run() -> None:
    run = Run(episode_budget=6)
    run.accept(StartAgent())
    run.publish("0", DA)
    started = run.submit("1:3", DB)
    assert next_step(run.state) == Evaluate(submission_id=2, program_digest=DB, indices=(1, 2))
    run.reject(StartAgent(), "invalid_request")
    failed = run.fail()
    assert failed == EvaluationFailed(submission_id=2, error="env fault", budget_consumed=2)
    assert run.state.budget_used == started.budget_used == 3
    assert not run.state.authority_open and run.state.evaluation_failed
    assert next_step(run.state) == StopAgent()
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Conclude()
    run.reject(StartValidation(), "invalid_request")
    done = run.finished()
    assert done == RunFinished(reason="evaluation_failed")


def test_an_agent_exit_while_evaluating_lets_the_evaluation_finish() -> None:
    run = Run(episode_budget=6)
    run.accept(StartAgent())
    run.submit("0:2", DA)
    run.accept(AgentExit(exit_code=0))
    assert isinstance(next_step(run.state), Evaluate)
    run.complete(score=4.0)
    assert next_step(run.state) == Validate(candidates=(1,))


def test_a_host_crash_under_the_agent_keeps_the_session_while_attempts_remain() -> None:
    run = Run(episode_budget=6, max_agent_attempts=2)
    run.accept(StartAgent())
    run.accept(RecordMessages(messages=[Message(role="user", content="go")]))
    run.publish("0", DA, score=1.0)
    (interrupted,) = run.accept(Interrupt(reason="SIGKILL", last_position=9))
    assert interrupted == RunInterrupted(reason="SIGKILL", last_position=9)
    run.reject(Interrupt(reason="again"), "invalid_request")
    resumed = run.accept(Resume())
    assert resumed == [
        RunResumed(attempt=1),
        AgentExited(attempt=1, reason=HOST_INTERRUPTED),
    ]
    assert run.state.authority_open and not run.state.agent_running
    assert not run.state.interrupted
    assert next_step(run.state) == StartAgent()
    run.publish("1", DB, score=2.0)  # the session is still open
    (restarted,) = run.accept(StartAgent())
    assert restarted == AgentStarted(attempt=2)
    (chunk,) = run.accept(RecordMessages(messages=[]))
    assert isinstance(chunk, AgentMessages) and (chunk.attempt, chunk.chunk) == (2, 0)
    run.accept(Interrupt(reason="SIGKILL"))
    resumed = run.accept(Resume())
    assert resumed == [RunResumed(attempt=2), AgentExited(attempt=2, reason=HOST_INTERRUPTED)]
    assert not run.state.authority_open  # both attempts are used up
    run.reject(run.submit_cmd("2", DC), "session_closed")
    run.reject(StartAgent(), "invalid_request")
    assert next_step(run.state) == Validate(candidates=(2, 1))
    assert terminal_reason(run.state) == "agent_failed"


def test_a_host_crash_while_the_agent_is_not_running() -> None:
    run = Run(episode_budget=6, max_agent_attempts=1)
    run.submit("0", DA)
    run.accept(Interrupt(reason="SIGKILL"))
    assert run.accept(Resume()) == [RunResumed(attempt=1)]
    assert run.state.authority_open
    assert isinstance(next_step(run.state), Evaluate)
    run.complete()
    assert next_step(run.state) == StartAgent()


def test_a_host_crash_after_finish_closes_nothing_new() -> None:
    run = validated_run(max_agent_attempts=3)
    run.accept(run.finish_cmd(2))
    run.accept(Interrupt(reason="SIGKILL"))
    resumed = run.accept(Resume())
    assert resumed[1] == AgentExited(attempt=1, reason=HOST_INTERRUPTED)
    assert not run.state.authority_open  # the finish ended the session already
    assert next_step(run.state) == Validate(candidates=(2,))


def test_an_interrupted_run_takes_nothing_until_resumed_and_nothing_follows_the_end() -> None:
    run = Run(episode_budget=2)
    run.accept(StartAgent())
    run.accept(AgentExit(exit_code=0))
    run.accept(Interrupt(reason="stop"))
    for command in (Conclude(), StartAgent(), StartValidation()):
        run.reject(command, "invalid_request")
    run.accept(Resume())
    done = run.finished()
    assert done.reason == "agent_exited" and not run.state.interrupted
    run.reject(Interrupt(reason="again"), "invalid_request")


def test_resume_needs_an_interrupted_run() -> None:
    decision = decide(RunState(), Resume())
    assert isinstance(decision, Rejection) and decision.code == "invalid_request"
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.reject(Resume(), "invalid_request")  # a live Run: the Agent must not be declared dead
    assert run.state.agent_running
    run.accept(Interrupt(reason="SIGKILL"))
    run.accept(Resume())
    run.reject(Resume(), "invalid_request")
