"""The Host's own commands: the events that record each, by the Run's rules.

The Host issues these itself, so a refusal (``InvalidTransition``) is a bug in the
Host; ``decide`` answers it as an ``invalid_request`` Rejection without an event.
``HOST_COMMANDS`` maps each command to its rule; ``decide_host_command`` first applies
the rules every command shares (created, not finished, not interrupted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    EvaluationFailed,
    Event,
    FinalSubmissionSelected,
    ReferenceValidated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.run.decider.commands import (
    HOST_INTERRUPTED,
    AgentExit,
    AssessCandidate,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Create,
    FailAssessment,
    FailEvaluation,
    FailValidation,
    Interrupt,
    InvalidTransition,
    RecordCandidate,
    RecordMessages,
    RecordReference,
    Resume,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    run_created,
)
from evopolicygym.run.decider.dispatch import rule_for
from evopolicygym.run.decider.selection import rank_candidates
from evopolicygym.run.decider.state import (
    RunState,
    pending_submission,
    reference_due,
    unassessed,
    unvalidated,
)
from evopolicygym.run.decider.steps import (
    Assess,
    Validate,
    handoff,
    improved,
    next_step,
    terminal_reason,
)

__all__ = ["HOST_COMMANDS", "HostCommandRule", "decide_host_command"]

HostCommandRule = Callable[[RunState, Any], list[Event]]


def decide_host_command(state: RunState, command: Command) -> list[Event]:
    """The events for a Host command; raises InvalidTransition where the rules refuse it."""
    # Rule: a stream opens with RunCreated, takes nothing after RunFinished but a late
    # RunInterrupted's refusal, and only RunResumed after RunInterrupted.
    if not isinstance(command, Create) and not state.created:
        raise InvalidTransition("the Run has not been created")
    if state.finished is not None and not isinstance(command, Interrupt):
        raise InvalidTransition(f"the Run has finished ({state.finished})")
    if state.interrupted and not isinstance(command, Resume | Interrupt):
        raise InvalidTransition("the Run is interrupted: resume it first")
    rule = rule_for(HOST_COMMANDS, type(command))
    if rule is None:
        raise InvalidTransition(f"unknown command {type(command).__name__}")
    return rule(state, command)


# --------------------------------------------------------------------------- the Run


def _create(state: RunState, command: Create) -> list[Event]:
    """Rule: a Run is created once, with its Episode pool inline (Runs recorded before
    pool blobs) or as a blob, not both."""
    if state.created:
        raise InvalidTransition("the Run already exists")
    if command.pool and command.pool_blob is not None:
        raise InvalidTransition("the Episode pool is inline or a blob, not both")
    return [run_created(command)]


def _interrupt(state: RunState, command: Interrupt) -> list[Event]:
    """Rule: only a live Run is interrupted (terminal reason ``interrupted`` until it is
    resumed)."""
    if not state.created or state.finished is not None or state.interrupted:
        raise InvalidTransition("only a live Run can be interrupted")
    return [RunInterrupted(reason=command.reason, last_position=command.last_position)]


def _resume(state: RunState, command: Resume) -> list[Event]:
    """Rule: only an interrupted Run is resumed; an Agent that was running died with the
    Host (it is started to die with it)."""
    if not state.interrupted:
        raise InvalidTransition("only an interrupted Run is resumed")
    events: list[Event] = [RunResumed(attempt=state.resumes + 1)]
    if state.agent_running:
        events.append(AgentExited(attempt=state.agent_attempts, reason=HOST_INTERRUPTED))
    return events


def _conclude(state: RunState, command: Conclude) -> list[Event]:
    """Rule: a Run finishes once nothing is left to do, with its terminal reason; rules 2
    also record who handed off, the reference score and whether the Program improved."""
    if not isinstance(next_step(state), Conclude):
        raise InvalidTransition("the Run still has work to do")
    legacy = state.cfg.legacy
    return [
        RunFinished(
            reason=terminal_reason(state),
            final_submission_id=state.selected,
            validation_score=state.selected_score if state.cfg.validation.enabled else None,
            assessment_score=state.assessment_score,
            handoff=None if legacy else handoff(state),
            reference_score=None if legacy else state.reference_score,
            improved=None if legacy else improved(state),
        )
    ]


# --------------------------------------------------------------------------- evaluation


def _complete_evaluation(state: RunState, command: CompleteEvaluation) -> list[Event]:
    """Rule: a Submission is published after exactly the Episodes reserved for it, in
    order, with the budget as reserved."""
    pending = pending_submission(state, command.submission_id)
    indices = [e.index for e in command.episodes]
    if tuple(indices) != pending.indices:
        raise InvalidTransition(
            f"Submission {pending.id} ran Episodes {indices}, not {list(pending.indices)}"
        )
    episodes: list[Event] = [
        msgspec.structs.replace(e, submission_id=pending.id) for e in command.episodes
    ]
    return [
        *episodes,
        SubmissionPublished(
            submission_id=pending.id,
            program_digest=pending.program_digest,
            score=command.score,
            failures=command.failures,
            content=command.content,
            artifacts=command.artifacts,
            budget_used=state.budget_used,
            budget_left=state.budget_left,
        ),
    ]


def _fail_evaluation(state: RunState, command: FailEvaluation) -> list[Event]:
    """Rule: budget is never refunded after a trusted fault: a failed evaluation consumes
    what it reserved (and ends the Run: ``evaluation_failed``)."""
    pending = pending_submission(state, command.submission_id)
    return [
        EvaluationFailed(
            submission_id=pending.id, error=command.error, budget_consumed=len(pending.indices)
        )
    ]


# --------------------------------------------------------------------------- the Agent


def _start_agent(state: RunState, command: StartAgent) -> list[Event]:
    """Rule: the Agent runs only while it holds the session, one attempt at a time, never
    while a Submission is being evaluated."""
    if not state.authority_open or state.agent_running or state.pending is not None:
        raise InvalidTransition("the Agent cannot be started now")
    return [
        AgentStarted(
            attempt=state.agent_attempts + 1,
            command=command.command,
            pid=command.pid,
            tools=command.tools,
        )
    ]


def _record_messages(state: RunState, command: RecordMessages) -> list[Event]:
    """Rule: the transcript is the current attempt's, in chunks numbered from 0."""
    if state.agent_attempts == 0:
        raise InvalidTransition("no Agent has been started")
    return [
        AgentMessages(
            attempt=state.agent_attempts,
            chunk=state.transcript_chunks,
            messages=command.messages,
            raw_blob=command.raw_blob,
            source=command.source,
            tools=command.tools,
        )
    ]


def _agent_exit(state: RunState, command: AgentExit) -> list[Event]:
    """Rule: only a running Agent exits; its exit ends its session (``agent_exited`` or
    ``agent_failed`` when it never finished)."""
    if not state.agent_running:
        raise InvalidTransition("no Agent is running")
    return [
        AgentExited(
            attempt=state.agent_attempts,
            exit_code=command.exit_code,
            signal=command.signal,
            reason=command.reason,
            stdout_blob=command.stdout_blob,
            stderr_blob=command.stderr_blob,
            unknown_kinds=command.unknown_kinds,
            errors=command.errors,
            last_error=command.last_error,
        )
    ]


# --------------------------------------------------------------------------- Validation


def _start_validation(state: RunState, command: StartValidation) -> list[Event]:
    """Rule: Validation starts once, when the Run needs it, on the candidates of the
    Agent's finish (or of the Host's nomination, recorded as ``handoff: host``)."""
    step = next_step(state)
    if (
        not isinstance(step, Validate)
        or state.validation_candidates is not None
        or not state.cfg.validation.enabled
    ):
        raise InvalidTransition("Validation cannot start now")
    validation = state.cfg.validation
    return [
        ValidationStarted(
            candidates=list(step.candidates),
            split=validation.split,
            episodes=validation.episodes_per_candidate,
            seed=state.seeds["validation"],
            handoff=None
            if state.cfg.legacy
            else "agent"
            if state.finish_candidates is not None
            else "host",
        )
    ]


def _record_reference(state: RunState, command: RecordReference) -> list[Event]:
    """Rule: the initial Program is validated first, once, as the reference (never
    selectable)."""
    if not reference_due(state) or state.validated:
        raise InvalidTransition("the initial Program is not due for Validation")
    return [
        ReferenceValidated(
            program_digest=state.initial_program_digest,
            score=command.score,
            failures=command.failures,
            episodes=command.episodes,
        )
    ]


def _record_candidate(state: RunState, command: RecordCandidate) -> list[Event]:
    """Rule: candidates are validated in finish order; after the last one, the best is
    selected (score in the Benchmark's direction, then fewer failures, then finish order)."""
    remaining = unvalidated(state)
    if reference_due(state):
        raise InvalidTransition("the initial Program is validated before the candidates")
    if not remaining or command.submission_id != remaining[0]:
        raise InvalidTransition(f"Submission {command.submission_id} is not next to validate")
    record = CandidateValidated(
        submission_id=command.submission_id,
        score=command.score,
        failures=command.failures,
        episodes=command.episodes,
    )
    if len(remaining) > 1:
        return [record]
    results = [*state.validated, record]
    best = rank_candidates(
        [(r.submission_id, r.score, r.failures) for r in results], state.score_direction
    )[0]
    chosen = next(r for r in results if r.submission_id == best)
    return [
        record,
        FinalSubmissionSelected(
            submission_id=best,
            program_digest=state.submissions[best - 1].program_digest,
            score=chosen.score,
            reason=f"best of {len(results)} on Validation "
            f"({state.score_direction} score, then fewer failures, then finish order)",
        ),
    ]


def _fail_validation(state: RunState, command: FailValidation) -> list[Event]:
    """Rule: a trusted fault during Validation ends the Run (``validation_failed``)."""
    if state.validation_candidates is None or state.selected is not None or state.validation_failed:
        raise InvalidTransition("no Validation is running")
    return [ValidationFailed(error=command.error)]


def _select(state: RunState, command: Select) -> list[Event]:
    """Rule: with Validation disabled, the final Submission is the first candidate, on its
    train score."""
    step = next_step(state)
    if not isinstance(step, Validate) or state.cfg.validation.enabled:
        raise InvalidTransition("a final Submission is chosen by Validation in this Run")
    best = step.candidates[0]
    first = state.submissions[best - 1]
    return [
        FinalSubmissionSelected(
            submission_id=best,
            program_digest=first.program_digest,
            score=first.score if first.score is not None else 0.0,
            reason="Validation disabled: the first candidate, on its train score",
        )
    ]


# --------------------------------------------------------------------------- Assessment


def _assessment_running(state: RunState) -> bool:
    return (
        state.assessment_started and state.assessment_score is None and not state.assessment_failed
    )


def _start_assessment(state: RunState, command: StartAssessment) -> list[Event]:
    """Rule: Assessment evaluates only the selected Program, once, on its own seed domain."""
    step = next_step(state)
    if not isinstance(step, Assess) or state.assessment_started:
        raise InvalidTransition("Assessment cannot start now")
    assessment = state.cfg.assessment
    return [
        AssessmentStarted(
            submission_id=step.submission_id,
            split=assessment.split,
            episodes=assessment.episodes,
            seed=state.seeds["assessment"],
        )
    ]


def _complete_assessment(state: RunState, command: CompleteAssessment) -> list[Event]:
    """Rule: the running Assessment records the selected Program's score."""
    if not _assessment_running(state):
        raise InvalidTransition("no Assessment is running")
    return [
        AssessmentCompleted(
            submission_id=state.selected or 0,
            score=command.score,
            failures=command.failures,
            episodes=command.episodes,
            content=command.content,
        )
    ]


def _fail_assessment(state: RunState, command: FailAssessment) -> list[Event]:
    """Rule: a trusted fault during Assessment ends the Run (``assessment_failed``)."""
    if not _assessment_running(state):
        raise InvalidTransition("no Assessment is running")
    return [AssessmentFailed(error=command.error)]


def _assess_candidate(state: RunState, command: AssessCandidate) -> list[Event]:
    """Rule: with ``assessment.candidates``, the other validated candidates are assessed in
    Validation order on the selected one's Episodes; a failed one fails only itself."""
    remaining = unassessed(state)
    if not remaining or command.submission_id != remaining[0]:
        raise InvalidTransition(f"Submission {command.submission_id} is not next to assess")
    if (command.score is None) == (command.error is None):
        raise InvalidTransition("a candidate's Assessment has a score or an error, not both")
    return [
        CandidateAssessed(
            submission_id=command.submission_id,
            score=command.score,
            failures=command.failures,
            episodes=command.episodes,
            content=command.content,
            error=command.error,
        )
    ]


HOST_COMMANDS: dict[type[Command], HostCommandRule] = {
    Create: _create,
    CompleteEvaluation: _complete_evaluation,
    FailEvaluation: _fail_evaluation,
    StartAgent: _start_agent,
    RecordMessages: _record_messages,
    AgentExit: _agent_exit,
    StartValidation: _start_validation,
    RecordReference: _record_reference,
    RecordCandidate: _record_candidate,
    FailValidation: _fail_validation,
    Select: _select,
    StartAssessment: _start_assessment,
    CompleteAssessment: _complete_assessment,
    FailAssessment: _fail_assessment,
    AssessCandidate: _assess_candidate,
    Interrupt: _interrupt,
    Resume: _resume,
    Conclude: _conclude,
}
