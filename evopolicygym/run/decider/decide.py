"""``decide(state, command)``: the events that record a command, or why it is refused. Pure.

The Agent's requests are checked against the Run's rules and limits; a refused one
answers with a ``Rejection`` that carries the rejection event the log keeps too. The
Host's own commands are refused only by a bug in the Host.
"""

from __future__ import annotations

import msgspec

from evopolicygym.protocol import SelectorError, parse_selector
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
    Finish,
    Interrupt,
    InvalidTransition,
    Malformed,
    RecordCandidate,
    RecordMessages,
    RecordReference,
    Rejection,
    Resume,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    Submit,
)
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

__all__ = ["decide"]


def decide(state: RunState, command: Command) -> list[Event] | Rejection:
    """The events that record ``command`` in ``state``, or why it is refused."""
    match command:
        case Submit():
            return _submit(state, command)
        case Finish():
            return _finish(state, command)
        case Malformed():
            message = f"malformed request: {command.message}"[:1000]
            if not state.created or state.finished is not None or state.interrupted:
                return Rejection(code="invalid_request", message=message)
            event = SubmissionRejected(request_id="", code="invalid_request", message=message)
            return Rejection(code="invalid_request", message=message, event=event)
    try:
        return _host(state, command)
    except InvalidTransition as exc:
        return Rejection(code="invalid_request", message=str(exc))


def _submit_rejection(command: Submit, code: str, message: str) -> Rejection:
    event = SubmissionRejected(
        request_id=command.request_id,
        code=code,
        message=message,
        program_digest=command.program_digest,
        selector=command.selector[:1000],
    )
    return Rejection(code=code, message=message, event=event)


def _submit(state: RunState, command: Submit) -> list[Event] | Rejection:
    def reject(code: str, message: str) -> Rejection:
        return _submit_rejection(command, code, message)

    if not state.created or state.finished is not None or state.interrupted:
        # Nothing to record on a stream that does not exist yet, has ended, or whose Host is
        # going down: only RunResumed may follow RunInterrupted.
        return Rejection(code="session_closed", message="the session is closed: the Run has ended")
    if not state.authority_open:
        return reject("session_closed", "the session is closed: no more submissions in this Run")
    config = state.cfg
    if state.pending is not None:
        return reject("invalid_request", f"Submission {state.pending.id} is still being evaluated")
    if command.problem is not None or command.program_digest is None:
        return reject(
            "program_invalid", f"program rejected: {command.problem or 'no program sent'}"
        )
    try:
        indices = parse_selector(command.selector)
    except SelectorError as exc:
        return reject("invalid_request", f"--episodes: {exc}")
    parent_digest = state.latest_program_digest  # unless the Agent says what it edited
    if command.parent is not None:
        if command.parent == 0:
            parent_digest = state.initial_program_digest
        elif (stated := state.submission(command.parent)) is not None:
            parent_digest = stated.program_digest
        else:
            return reject(
                "invalid_request",
                f"--parent {command.parent}: no such Submission (0 is the initial program)",
            )
    if indices[-1] >= config.pool_size:
        return reject(
            "invalid_request",
            f"Episode index {indices[-1]} is outside the pool (indices 0..{config.pool_size - 1})",
        )
    count = len(indices)
    if count > config.episode_limit:
        return reject(
            "episode_limit",
            f"{count} Episodes requested; at most {config.episode_limit} per submission",
        )
    if len(state.submissions) >= config.submission_limit:
        return reject(
            "submission_limit", f"all {config.submission_limit} submissions have been used"
        )
    left = state.budget_left
    if left == 0:
        return reject("budget_exhausted", f"the Episode budget of {config.episode_budget} is spent")
    if count > left:
        return reject(
            "budget_allocation", f"{count} Episodes requested but only {left} left in the budget"
        )
    if config.finish_budget_policy == "require_budget_exhaustion":
        submissions_after = config.submission_limit - len(state.submissions) - 1
        if left - count > submissions_after * config.episode_limit:
            return reject(
                "budget_allocation",
                f"after {count} Episodes, {left - count} would be left for {submissions_after} "
                f"submissions of at most {config.episode_limit}: the budget could never be spent, "
                "which this Run requires",
            )
    if config.legacy:  # rules 1 refused a repeat; rules 2 charge it like any Submission
        key = tuple(indices)
        for previous in state.submissions:
            if (
                previous.status != "failed"
                and previous.program_digest == command.program_digest
                and previous.indices == key
            ):
                return reject(
                    "duplicate_submission",
                    f"this program was already evaluated on these Episodes (Submission {previous.id})",
                )
    return [
        EvaluationStarted(
            submission_id=len(state.submissions) + 1,
            program_digest=command.program_digest,
            parent_program_digest=parent_digest,
            parent_submission_id=command.parent,
            indices=indices,
            budget_reserved=count,
            budget_used=state.budget_used + count,
        )
    ]


def _finish(state: RunState, command: Finish) -> list[Event] | Rejection:
    def reject(code: str, message: str) -> Rejection:
        event = FinishRejected(
            request_id=command.request_id,
            code=code,
            message=message,
            candidates=command.candidates[:1000],
        )
        return Rejection(code=code, message=message, event=event)

    if not state.created or state.finished is not None or state.interrupted:
        return Rejection(code="session_closed", message="the session is closed: the Run has ended")
    if not state.authority_open:
        return reject("session_closed", "the session is closed: the Run no longer takes a finish")
    config = state.cfg
    if state.pending is not None:
        return reject("invalid_request", f"Submission {state.pending.id} is still being evaluated")
    candidates = command.candidates
    if not candidates:
        return reject("invalid_request", "name at least one Submission id to finish with")
    if len(set(candidates)) != len(candidates):
        return reject("duplicate_submission", "a Submission id is named twice")
    if len(candidates) > config.validation.max_candidates:
        return reject(
            "candidate_limit",
            f"{len(candidates)} candidates named; at most {config.validation.max_candidates}",
        )
    for candidate in candidates:
        found = state.submission(candidate)
        if found is None or found.status != "published":
            return reject("unknown_submission", f"no published Submission with id {candidate}")
    if config.finish_budget_policy == "require_budget_exhaustion" and state.budget_left > 0:
        return reject(
            "budget_remaining",
            f"{state.budget_left} Episodes of budget are left; this Run requires spending them all "
            "before finishing",
        )
    return [FinishAccepted(request_id=command.request_id, candidates=list(candidates))]


def _host(state: RunState, command: Command) -> list[Event]:
    """Commands the Host issues itself; a refusal here is a bug in the service."""
    if not isinstance(command, Create) and not state.created:
        raise InvalidTransition("the Run has not been created")
    if state.finished is not None and not isinstance(command, Interrupt):
        raise InvalidTransition(f"the Run has finished ({state.finished})")
    if state.interrupted and not isinstance(command, Resume | Interrupt):
        raise InvalidTransition("the Run is interrupted: resume it first")
    match command:
        case Create():
            if state.created:
                raise InvalidTransition("the Run already exists")
            if command.pool and command.pool_blob is not None:
                raise InvalidTransition("the Episode pool is inline or a blob, not both")
            return [
                RunCreated(
                    run_id=command.run_id,
                    config=command.config.to_dict(),
                    benchmark_id=command.benchmark_id,
                    benchmark_spec=command.benchmark_spec,
                    environment_digest=command.environment_digest,
                    initial_program_digest=command.initial_program_digest,
                    agent=command.agent,
                    pool=command.pool,
                    pool_blob=command.pool_blob,
                    seeds=command.seeds,
                    skill_program_digests=command.skill_program_digests,
                    agent_containment=command.agent_containment,
                )
            ]
        case CompleteEvaluation():
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
        case FailEvaluation():
            pending = pending_submission(state, command.submission_id)
            return [
                EvaluationFailed(
                    submission_id=pending.id,
                    error=command.error,
                    budget_consumed=len(pending.indices),
                )
            ]
        case StartAgent():
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
        case RecordMessages():
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
        case AgentExit():
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
        case StartValidation():
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
        case RecordReference():
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
        case RecordCandidate():
            remaining = unvalidated(state)
            if reference_due(state):
                raise InvalidTransition("the initial Program is validated before the candidates")
            if not remaining or command.submission_id != remaining[0]:
                raise InvalidTransition(
                    f"Submission {command.submission_id} is not next to validate"
                )
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
        case FailValidation():
            if (
                state.validation_candidates is None
                or state.selected is not None
                or state.validation_failed
            ):
                raise InvalidTransition("no Validation is running")
            return [ValidationFailed(error=command.error)]
        case Select():
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
        case StartAssessment():
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
        case CompleteAssessment():
            if (
                not state.assessment_started
                or state.assessment_score is not None
                or state.assessment_failed
            ):
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
        case FailAssessment():
            if (
                not state.assessment_started
                or state.assessment_score is not None
                or state.assessment_failed
            ):
                raise InvalidTransition("no Assessment is running")
            return [AssessmentFailed(error=command.error)]
        case AssessCandidate():
            remaining = unassessed(state)
            if not remaining or command.submission_id != remaining[0]:
                raise InvalidTransition(f"Submission {command.submission_id} is not next to assess")
            if (command.score is None) == (command.error is None):
                raise InvalidTransition(
                    "a candidate's Assessment has a score or an error, not both"
                )
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
        case Interrupt():
            if not state.created or state.finished is not None or state.interrupted:
                raise InvalidTransition("only a live Run can be interrupted")
            return [RunInterrupted(reason=command.reason, last_position=command.last_position)]
        case Resume():
            if not state.interrupted:
                raise InvalidTransition("only an interrupted Run is resumed")
            events: list[Event] = [RunResumed(attempt=state.resumes + 1)]
            if state.agent_running:  # it died with the Host (it is started to die with it)
                events.append(AgentExited(attempt=state.agent_attempts, reason=HOST_INTERRUPTED))
            return events
        case Conclude():
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
    raise InvalidTransition(f"unknown command {type(command).__name__}")
