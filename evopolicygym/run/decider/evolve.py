"""``evolve(state, event)``: the state after one event, and ``fold`` over many. Pure.

``evolve`` refuses an event the rules could not have produced (for the Agent's
requests and the Host's commands, by asking ``decide`` whether it would have
answered with exactly that event), so folding a stream also verifies it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

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
from evopolicygym.run.decider.decide import decide
from evopolicygym.run.decider.selection import rank_candidates
from evopolicygym.run.decider.state import (
    RunState,
    Submission,
    pending_submission,
    reference_due,
    unvalidated,
)
from evopolicygym.run.decider.steps import Validate, next_step

__all__ = ["evolve", "fold"]


def evolve(state: RunState, event: Event) -> RunState:
    """The state after ``event``; raises InvalidTransition for an event the rules forbid."""
    replace = msgspec.structs.replace
    if not state.created and not isinstance(event, RunCreated):
        raise InvalidTransition(f"{event.type_name()} before RunCreated")
    if state.finished is not None:
        raise InvalidTransition(f"{event.type_name()} after RunFinished")
    if state.interrupted and not isinstance(event, RunResumed):
        raise InvalidTransition(f"{event.type_name()} after RunInterrupted, before RunResumed")
    state = replace(state, version=state.version + 1)
    match event:
        case RunCreated():
            if state.version != 1:
                raise InvalidTransition("RunCreated must open the stream")
            if event.pool and event.pool_blob is not None:
                raise InvalidTransition("RunCreated holds its Episode pool inline and as a blob")
            config = RunConfig.from_dict(event.config)
            return replace(
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
        case EvaluationStarted():
            # Exactly what decide() answers to the same request, or refused: limits, budget
            # allocation, duplicates and the parent all follow from the state.
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
                    again.message
                    if isinstance(again, Rejection)
                    else "it differs from what the rules give"
                )
                raise InvalidTransition(
                    f"EvaluationStarted for Submission {event.submission_id} could not have been accepted: {reason}"
                )
            if event.submission_id != len(state.submissions) + 1 or state.pending is not None:
                raise InvalidTransition(
                    f"EvaluationStarted for Submission {event.submission_id} out of order"
                )
            if (
                event.budget_used != state.budget_used + event.budget_reserved
                or event.budget_used > state.cfg.episode_budget
            ):
                raise InvalidTransition(
                    f"Submission {event.submission_id} reserves budget inconsistently"
                )
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
                    f"Submission {event.submission_id} reserves {event.budget_reserved} for {len(event.indices)} Episodes"
                )
            submission = Submission(
                id=event.submission_id,
                program_digest=event.program_digest,
                parent_program_digest=event.parent_program_digest,
                indices=tuple(event.indices),
            )
            return replace(
                state, budget_used=event.budget_used, submissions=(*state.submissions, submission)
            )
        case EpisodeCompleted():
            pending = pending_submission(state, event.submission_id)
            if (
                pending.completed >= len(pending.indices)
                or event.index != pending.indices[pending.completed]
            ):
                raise InvalidTransition(
                    f"EpisodeCompleted for Episode {event.index} of Submission {pending.id} out of order"
                )
            done = replace(pending, completed=pending.completed + 1)
            return replace(state, submissions=(*state.submissions[:-1], done))
        case SubmissionPublished():
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
            done = replace(pending, status="published", score=event.score, failures=event.failures)
            return replace(state, submissions=(*state.submissions[:-1], done))
        case EvaluationFailed():
            pending = pending_submission(state, event.submission_id)
            if event.budget_consumed != len(pending.indices):
                raise InvalidTransition("a failed evaluation must consume its reserved budget")
            failed = replace(pending, status="failed")
            return replace(
                state,
                submissions=(*state.submissions[:-1], failed),
                evaluation_failed=True,
                authority_open=False,
            )
        case SubmissionRejected() | FinishRejected():
            return state
        case FinishAccepted():
            again = decide(
                state, Finish(request_id=event.request_id, candidates=list(event.candidates))
            )
            if isinstance(again, Rejection):
                raise InvalidTransition(
                    f"FinishAccepted could not have been accepted: {again.message}"
                )
            return replace(state, finish_candidates=tuple(event.candidates), authority_open=False)
        case AgentStarted():
            if (
                state.agent_running
                or not state.authority_open
                or state.pending is not None
                or event.attempt != state.agent_attempts + 1
            ):
                raise InvalidTransition(f"AgentStarted attempt {event.attempt} out of order")
            return replace(
                state, agent_attempts=event.attempt, agent_running=True, transcript_chunks=0
            )
        case AgentMessages():
            if (
                event.attempt < 1
                or event.attempt != state.agent_attempts
                or event.chunk != state.transcript_chunks
            ):
                raise InvalidTransition(
                    f"AgentMessages chunk {event.chunk} of attempt {event.attempt} out of order"
                )
            return replace(state, transcript_chunks=state.transcript_chunks + 1)
        case AgentExited():
            if not state.agent_running or event.attempt != state.agent_attempts:
                raise InvalidTransition(
                    f"AgentExited for attempt {event.attempt}, which is not running"
                )
            # A Host crash does not end the Agent's authority: the Agent is restarted, while
            # attempts remain. Any other exit ends it.
            keep = (
                state.authority_open
                and event.reason == HOST_INTERRUPTED
                and state.agent_attempts < state.cfg.max_agent_attempts
            )
            return replace(
                state,
                agent_running=False,
                agent_exits=(*state.agent_exits, event),
                authority_open=keep,
            )
        case ValidationStarted():
            _as_decided(state, StartValidation(), event)
            return replace(
                state, validation_candidates=tuple(event.candidates), handoff=event.handoff
            )
        case ReferenceValidated():
            _as_decided(
                state,
                RecordReference(
                    score=event.score, failures=event.failures, episodes=list(event.episodes)
                ),
                event,
            )
            return replace(state, reference_validated=True, reference_score=event.score)
        case CandidateValidated():
            remaining = unvalidated(state)
            if reference_due(state):
                raise InvalidTransition(
                    f"CandidateValidated {event.submission_id} before the initial Program's"
                )
            if not remaining or remaining[0] != event.submission_id:
                raise InvalidTransition(f"CandidateValidated {event.submission_id} out of order")
            return replace(state, validated=(*state.validated, event))
        case ValidationFailed():
            if (
                state.validation_candidates is None
                or state.selected is not None
                or state.validation_failed
            ):
                raise InvalidTransition("ValidationFailed with no Validation running")
            return replace(state, validation_failed=True)
        case FinalSubmissionSelected():
            step = next_step(state)
            if state.selected is not None or not isinstance(step, Validate):
                raise InvalidTransition("FinalSubmissionSelected out of turn")
            if state.cfg.validation.enabled:
                results = [(r.submission_id, r.score, r.failures) for r in state.validated]
                if unvalidated(state) or not results:
                    raise InvalidTransition(
                        "FinalSubmissionSelected before every candidate was validated"
                    )
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
            return replace(state, selected=event.submission_id, selected_score=event.score)
        case AssessmentStarted():
            _as_decided(state, StartAssessment(), event)
            return replace(state, assessment_started=True)
        case AssessmentCompleted() | AssessmentFailed():
            if (
                not state.assessment_started
                or state.assessment_score is not None
                or state.assessment_failed
            ):
                raise InvalidTransition(f"{event.type_name()} with no Assessment running")
            if isinstance(event, AssessmentFailed):
                return replace(state, assessment_failed=True)
            return replace(state, assessment_score=event.score)
        case CandidateAssessed():
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
            return replace(state, candidates_assessed=(*state.candidates_assessed, event))
        case RunInterrupted():
            if state.interrupted:
                raise InvalidTransition("RunInterrupted twice without RunResumed")
            return replace(state, interrupted=True)
        case RunResumed():
            if not state.interrupted or event.attempt != state.resumes + 1:
                raise InvalidTransition(f"RunResumed attempt {event.attempt} out of order")
            return replace(state, interrupted=False, resumes=event.attempt)
        case RunFinished():
            _as_decided(state, Conclude(), event)
            return replace(state, finished=event.reason, authority_open=False, interrupted=False)
    raise InvalidTransition(f"unknown event {event.type_name()}")


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
