"""``evolve(state, event)``: the state after one event, and ``fold`` over many. Pure.

``evolve`` refuses an event the rules could not have produced (for the Agent's
requests and the Host's commands, by asking ``decide`` whether it would have
answered with exactly that event), so folding a stream also verifies it. ``FOLDS``
maps each event to the function that checks it against the Run's rules and folds it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from evopolicygym.protocol import format_selector
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    FinishRejected,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider.commands import (
    HOST_INTERRUPTED,
    AssessCandidate,
    Command,
    Conclude,
    Finish,
    InvalidTransition,
    RecordReference,
    Rejection,
    StartAssessment,
    StartValidation,
    Submit,
)
from evopolicygym.run.decider.decision import decide
from evopolicygym.run.decider.dispatch import rule_for
from evopolicygym.run.decider.selection import rank_candidates
from evopolicygym.run.decider.state import (
    RunState,
    Submission,
    pending_submission,
    reference_due,
    unvalidated,
)
from evopolicygym.run.decider.steps import Validate, next_step

__all__ = ["FOLDS", "Fold", "evolve", "fold"]

Fold = Callable[[RunState, Any], RunState]
_replace = msgspec.structs.replace


def evolve(state: RunState, event: Event) -> RunState:
    """The state after ``event``; raises InvalidTransition for an event the rules forbid."""
    # Rule: a stream opens with RunCreated, ends with RunFinished, and after RunInterrupted
    # takes only RunResumed.
    if not state.created and not isinstance(event, RunCreated):
        raise InvalidTransition(f"{event.type_name()} before RunCreated")
    if state.finished is not None:
        raise InvalidTransition(f"{event.type_name()} after RunFinished")
    if state.interrupted and not isinstance(event, RunResumed):
        raise InvalidTransition(f"{event.type_name()} after RunInterrupted, before RunResumed")
    state = _replace(state, version=state.version + 1)
    fold_in = rule_for(FOLDS, type(event))
    if fold_in is None:
        raise InvalidTransition(f"unknown event {event.type_name()}")
    return fold_in(state, event)


# --------------------------------------------------------------------------- the Run


def _run_created(state: RunState, event: RunCreated) -> RunState:
    """Rule: RunCreated opens the stream, with its Episode pool inline or as a blob; the
    Agent holds the session from the start."""
    if state.version != 1:
        raise InvalidTransition("RunCreated must open the stream")
    if event.pool and event.pool_blob is not None:
        raise InvalidTransition("RunCreated holds its Episode pool inline and as a blob")
    config = RunConfig.from_dict(event.config)
    return _replace(
        state,
        run_id=event.run_id,
        config=config,
        score_direction=str(event.benchmark_spec.get("score_direction", "maximize")),
        initial_program_digest=event.initial_program_digest,
        pool=tuple(event.pool),
        pool_blob=event.pool_blob,
        seeds=dict(event.seeds),
        authority_open=True,
    )


def _run_interrupted(state: RunState, event: RunInterrupted) -> RunState:
    """Rule: an interrupted Run is interrupted once, until it is resumed."""
    if state.interrupted:
        raise InvalidTransition("RunInterrupted twice without RunResumed")
    return _replace(state, interrupted=True)


def _run_resumed(state: RunState, event: RunResumed) -> RunState:
    """Rule: only an interrupted Run resumes, its resumes numbered from 1."""
    if not state.interrupted or event.attempt != state.resumes + 1:
        raise InvalidTransition(f"RunResumed attempt {event.attempt} out of order")
    return _replace(state, interrupted=False, resumes=event.attempt)


def _run_finished(state: RunState, event: RunFinished) -> RunState:
    """Rule: the Run finishes as ``Conclude`` decides (its terminal reason and, rules 2,
    handoff and improvement); nothing follows."""
    _as_decided(state, Conclude(), event)
    return _replace(state, finished=event.reason, authority_open=False, interrupted=False)


# --------------------------------------------------------------------------- evaluation


def _as_submitted(state: RunState, event: EvaluationStarted) -> None:
    """Refuse ``event`` unless it is exactly what ``decide`` answers to the same submit:
    limits, budget allocation, duplicates and the parent all follow from the state."""
    again = decide(
        state,
        Submit(
            request_id="",
            selector=format_selector(list(event.indices)),
            program_digest=event.program_digest,
            parent=event.parent_submission_id,
        ),
    )
    if not isinstance(again, list) or again != [event]:
        reason = (
            again.message if isinstance(again, Rejection) else "it differs from what the rules give"
        )
        raise InvalidTransition(
            f"EvaluationStarted for Submission {event.submission_id} "
            f"could not have been accepted: {reason}"
        )


def _check_reservation(state: RunState, event: EvaluationStarted) -> None:
    """Rule: Submissions are numbered in order, one evaluated at a time, each reserving
    its Episodes from the budget before it runs; within the session, pool and limits."""
    if event.submission_id != len(state.submissions) + 1 or state.pending is not None:
        raise InvalidTransition(
            f"EvaluationStarted for Submission {event.submission_id} out of order"
        )
    if (
        event.budget_used != state.budget_used + event.budget_reserved
        or event.budget_used > state.cfg.episode_budget
    ):
        raise InvalidTransition(f"Submission {event.submission_id} reserves budget inconsistently")
    indices = event.indices
    if (
        not state.authority_open
        or not indices
        or any(b <= a for a, b in itertools.pairwise(indices))
        or indices[0] < 0
        or indices[-1] >= state.cfg.pool_size
        or len(indices) > state.cfg.episode_limit
        or event.submission_id > state.cfg.submission_limit
    ):
        raise InvalidTransition(
            f"Submission {event.submission_id} could not have been accepted "
            "(session closed, limits, or Episodes outside the pool)"
        )
    if event.budget_reserved != len(event.indices):
        raise InvalidTransition(
            f"Submission {event.submission_id} reserves {event.budget_reserved} "
            f"for {len(event.indices)} Episodes"
        )


def _evaluation_started(state: RunState, event: EvaluationStarted) -> RunState:
    """Rule: budget is reserved before evaluation, for a submit the rules accept."""
    _as_submitted(state, event)
    _check_reservation(state, event)
    submission = Submission(
        id=event.submission_id,
        program_digest=event.program_digest,
        parent_program_digest=event.parent_program_digest,
        indices=tuple(event.indices),
    )
    return _replace(
        state, budget_used=event.budget_used, submissions=(*state.submissions, submission)
    )


def _episode_completed(state: RunState, event: EpisodeCompleted) -> RunState:
    """Rule: the pending Submission's Episodes complete in the order reserved."""
    pending = pending_submission(state, event.submission_id)
    if (
        pending.completed >= len(pending.indices)
        or event.index != pending.indices[pending.completed]
    ):
        raise InvalidTransition(
            f"EpisodeCompleted for Episode {event.index} of Submission {pending.id} out of order"
        )
    done = _replace(pending, completed=pending.completed + 1)
    return _replace(state, submissions=(*state.submissions[:-1], done))


def _submission_published(state: RunState, event: SubmissionPublished) -> RunState:
    """Rule: a Submission is published once all its Episodes completed, with the budget as
    reserved and its own program."""
    pending = pending_submission(state, event.submission_id)
    if (
        pending.completed != len(pending.indices)
        or event.budget_used != state.budget_used
        or event.budget_left != state.budget_left
        or event.program_digest != pending.program_digest
    ):
        raise InvalidTransition(
            f"SubmissionPublished {event.submission_id} disagrees with its evaluation"
        )
    done = _replace(pending, status="published", score=event.score, failures=event.failures)
    return _replace(state, submissions=(*state.submissions[:-1], done))


def _evaluation_failed(state: RunState, event: EvaluationFailed) -> RunState:
    """Rule: budget is never refunded after a trusted fault; the fault ends the session and
    the Run (``evaluation_failed``)."""
    pending = pending_submission(state, event.submission_id)
    if event.budget_consumed != len(pending.indices):
        raise InvalidTransition("a failed evaluation must consume its reserved budget")
    failed = _replace(pending, status="failed")
    return _replace(
        state,
        submissions=(*state.submissions[:-1], failed),
        evaluation_failed=True,
        authority_open=False,
    )


# --------------------------------------------------------------------------- the Agent


def _rejected(state: RunState, event: SubmissionRejected | FinishRejected) -> RunState:
    """Rule: a rejected request consumes nothing (the log keeps it; only the version moves)."""
    return state


def _finish_accepted(state: RunState, event: FinishAccepted) -> RunState:
    """Rule: candidates come only from an accepted finish, which ends the Agent's session."""
    again = decide(state, Finish(request_id=event.request_id, candidates=list(event.candidates)))
    if isinstance(again, Rejection):
        raise InvalidTransition(f"FinishAccepted could not have been accepted: {again.message}")
    return _replace(state, finish_candidates=tuple(event.candidates), authority_open=False)


def _agent_started(state: RunState, event: AgentStarted) -> RunState:
    """Rule: the Agent runs only while it holds the session, attempts numbered from 1, never
    while a Submission is being evaluated."""
    if (
        state.agent_running
        or not state.authority_open
        or state.pending is not None
        or event.attempt != state.agent_attempts + 1
    ):
        raise InvalidTransition(f"AgentStarted attempt {event.attempt} out of order")
    return _replace(state, agent_attempts=event.attempt, agent_running=True, transcript_chunks=0)


def _agent_messages(state: RunState, event: AgentMessages) -> RunState:
    """Rule: the transcript is the current attempt's, its chunks numbered from 0."""
    if (
        event.attempt < 1
        or event.attempt != state.agent_attempts
        or event.chunk != state.transcript_chunks
    ):
        raise InvalidTransition(
            f"AgentMessages chunk {event.chunk} of attempt {event.attempt} out of order"
        )
    return _replace(state, transcript_chunks=state.transcript_chunks + 1)


def _agent_exited(state: RunState, event: AgentExited) -> RunState:
    """Rule: the running Agent's exit ends its session, except a Host crash under it while
    attempts remain (the Agent is restarted)."""
    if not state.agent_running or event.attempt != state.agent_attempts:
        raise InvalidTransition(f"AgentExited for attempt {event.attempt}, which is not running")
    keep = (
        state.authority_open
        and event.reason == HOST_INTERRUPTED
        and state.agent_attempts < state.cfg.max_agent_attempts
    )
    return _replace(
        state, agent_running=False, agent_exits=(*state.agent_exits, event), authority_open=keep
    )


# --------------------------------------------------------------------------- Validation


def _validation_started(state: RunState, event: ValidationStarted) -> RunState:
    """Rule: Validation starts as ``StartValidation`` decides: once, on the candidates."""
    _as_decided(state, StartValidation(), event)
    return _replace(state, validation_candidates=tuple(event.candidates), handoff=event.handoff)


def _reference_validated(state: RunState, event: ReferenceValidated) -> RunState:
    """Rule: the initial Program is validated first, once, as the reference (rules 2)."""
    _as_decided(
        state,
        RecordReference(score=event.score, failures=event.failures, episodes=list(event.episodes)),
        event,
    )
    return _replace(state, reference_validated=True, reference_score=event.score)


def _candidate_validated(state: RunState, event: CandidateValidated) -> RunState:
    """Rule: candidates are validated in order, after the reference."""
    remaining = unvalidated(state)
    if reference_due(state):
        raise InvalidTransition(
            f"CandidateValidated {event.submission_id} before the initial Program's"
        )
    if not remaining or remaining[0] != event.submission_id:
        raise InvalidTransition(f"CandidateValidated {event.submission_id} out of order")
    return _replace(state, validated=(*state.validated, event))


def _validation_failed(state: RunState, event: ValidationFailed) -> RunState:
    """Rule: a trusted fault during Validation ends the Run (``validation_failed``)."""
    if state.validation_candidates is None or state.selected is not None or state.validation_failed:
        raise InvalidTransition("ValidationFailed with no Validation running")
    return _replace(state, validation_failed=True)


def _final_submission_selected(state: RunState, event: FinalSubmissionSelected) -> RunState:
    """Rule: the final Submission is the best validated candidate (score in the Benchmark's
    direction, then fewer failures, then finish order), or with Validation disabled the
    first candidate; chosen once, in its turn."""
    step = next_step(state)
    if state.selected is not None or not isinstance(step, Validate):
        raise InvalidTransition("FinalSubmissionSelected out of turn")
    if state.cfg.validation.enabled:
        results = [(r.submission_id, r.score, r.failures) for r in state.validated]
        if unvalidated(state) or not results:
            raise InvalidTransition("FinalSubmissionSelected before every candidate was validated")
        expected = rank_candidates(results, state.score_direction)[0]
    else:
        expected = step.candidates[0]
    if (
        event.submission_id != expected
        or event.program_digest != state.submissions[expected - 1].program_digest
    ):
        raise InvalidTransition(
            f"FinalSubmissionSelected {event.submission_id}, but the rules select {expected}"
        )
    return _replace(state, selected=event.submission_id, selected_score=event.score)


# --------------------------------------------------------------------------- Assessment


def _assessment_started(state: RunState, event: AssessmentStarted) -> RunState:
    """Rule: Assessment starts as ``StartAssessment`` decides: the selected Program, once."""
    _as_decided(state, StartAssessment(), event)
    return _replace(state, assessment_started=True)


def _check_assessment_running(state: RunState, event: Event) -> None:
    if (
        not state.assessment_started
        or state.assessment_score is not None
        or state.assessment_failed
    ):
        raise InvalidTransition(f"{event.type_name()} with no Assessment running")


def _assessment_completed(state: RunState, event: AssessmentCompleted) -> RunState:
    """Rule: the running Assessment ends once, with the selected Program's score."""
    _check_assessment_running(state, event)
    return _replace(state, assessment_score=event.score)


def _assessment_failed(state: RunState, event: AssessmentFailed) -> RunState:
    """Rule: a trusted fault during Assessment ends the Run (``assessment_failed``)."""
    _check_assessment_running(state, event)
    return _replace(state, assessment_failed=True)


def _candidate_assessed(state: RunState, event: CandidateAssessed) -> RunState:
    """Rule: the other validated candidates are assessed as ``AssessCandidate`` decides:
    in Validation order, a score or an error each."""
    _as_decided(
        state,
        AssessCandidate(
            submission_id=event.submission_id,
            score=event.score,
            failures=event.failures,
            episodes=list(event.episodes),
            content=event.content,
            error=event.error,
        ),
        event,
    )
    return _replace(state, candidates_assessed=(*state.candidates_assessed, event))


def _as_decided(state: RunState, command: Command, event: Event) -> None:
    """Refuse ``event`` unless it is exactly what the Host's ``command`` yields in ``state``."""
    expected = decide(state, command)  # a Host command: refused only as a Rejection without event
    if isinstance(expected, Rejection):
        raise InvalidTransition(
            f"{event.type_name()} could not have been recorded here: {expected.message}"
        )
    if expected != [event]:
        raise InvalidTransition(
            f"{event.type_name()} differs from what the rules give in this state"
        )


def fold(events: Iterable[Event], state: RunState | None = None) -> RunState:
    """The state after ``events`` (from the empty state, or from ``state``)."""
    state = state or RunState()
    for event in events:
        state = evolve(state, event)
    return state


FOLDS: dict[type[Event], Fold] = {
    RunCreated: _run_created,
    EvaluationStarted: _evaluation_started,
    EpisodeCompleted: _episode_completed,
    SubmissionPublished: _submission_published,
    EvaluationFailed: _evaluation_failed,
    SubmissionRejected: _rejected,
    FinishRejected: _rejected,
    FinishAccepted: _finish_accepted,
    AgentStarted: _agent_started,
    AgentMessages: _agent_messages,
    AgentExited: _agent_exited,
    ValidationStarted: _validation_started,
    ReferenceValidated: _reference_validated,
    CandidateValidated: _candidate_validated,
    ValidationFailed: _validation_failed,
    FinalSubmissionSelected: _final_submission_selected,
    AssessmentStarted: _assessment_started,
    AssessmentCompleted: _assessment_completed,
    AssessmentFailed: _assessment_failed,
    CandidateAssessed: _candidate_assessed,
    RunInterrupted: _run_interrupted,
    RunResumed: _run_resumed,
    RunFinished: _run_finished,
}
