"""The Run as a decider: ``decide(state, command)`` and ``evolve(state, event)``, pure.

``decide`` checks a command against the state and answers with the events that
record it, or a ``Rejection`` (which, for the Agent's requests, carries the
rejection event that the log keeps too). ``evolve`` folds one event into the
state and refuses an event the rules could not have produced, so folding a
stream also verifies it. ``next_step`` tells the service what the Run needs
next; with it, resuming is just folding and continuing.

No I/O here: programs, evaluations and clocks live in the service.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from evopolicygym.protocol import SelectorError, format_selector, parse_selector
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    ArtifactRef,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    FinishRejected,
    PoolEntry,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    TerminalReason,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.run.config import RunConfig
from evopolicygym.transcript import AgentIdentity, Message

__all__ = [
    "HOST_INTERRUPTED",
    "REJECTION_CODES",
    "AgentExit",
    "Assess",
    "Command",
    "CompleteAssessment",
    "CompleteEvaluation",
    "Conclude",
    "Create",
    "Evaluate",
    "FailAssessment",
    "FailEvaluation",
    "FailValidation",
    "Finish",
    "Interrupt",
    "InvalidTransition",
    "Malformed",
    "RecordCandidate",
    "RecordMessages",
    "Rejection",
    "Resume",
    "RunState",
    "Select",
    "StartAgent",
    "StartAssessment",
    "StartValidation",
    "Step",
    "StopAgent",
    "Submission",
    "Submit",
    "Validate",
    "decide",
    "evolve",
    "fold",
    "next_step",
    "rank_candidates",
    "terminal_reason",
]

HOST_INTERRUPTED = "host_interrupted"  # AgentExited.reason when the Host died under the Agent

REJECTION_CODES: dict[str, str] = {
    "invalid_request": "the request is malformed or not possible in the Run's state",
    "episode_limit": "more Episodes than max_episodes_per_submission",
    "submission_limit": "max_submissions reached",
    "budget_exhausted": "no Episode budget left",
    "budget_allocation": "more Episodes than the budget left, or a split that leaves the budget unspendable",
    "program_invalid": "the program cannot be captured or has no policy.py",
    "candidate_limit": "more candidates than max_candidates",
    "duplicate_submission": "this program was already evaluated on these Episodes",
    "unknown_submission": "no published Submission with that id",
    "budget_remaining": "the Run requires the whole budget to be spent before finishing",
    "session_closed": "the Agent's authority over the Run has ended",
}


class InvalidTransition(Exception):
    """An event (or a Host command) that the Run's rules do not allow in this state."""


# --------------------------------------------------------------------------- state


class Submission(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    program_digest: str
    parent_program_digest: str | None
    indices: tuple[int, ...]
    status: Literal["evaluating", "published", "failed"] = "evaluating"
    score: float | None = None
    failures: int | None = None
    completed: int = 0  # EpisodeCompleted events so far, in the order of ``indices``


class RunState(msgspec.Struct, frozen=True, kw_only=True):
    version: int = 0  # events folded: the stream version the next append expects
    run_id: str = ""
    config: RunConfig | None = None
    score_direction: str = "maximize"
    initial_program_digest: str = ""
    pool: tuple[PoolEntry, ...] = ()
    seeds: dict[str, int] = {}
    budget_used: int = 0
    submissions: tuple[Submission, ...] = ()
    authority_open: bool = False
    finish_candidates: tuple[int, ...] | None = None
    evaluation_failed: bool = False
    agent_attempts: int = 0
    agent_running: bool = False
    agent_exits: tuple[AgentExited, ...] = ()
    transcript_chunks: int = 0  # AgentMessages of the current attempt
    validation_candidates: tuple[int, ...] | None = None
    validated: tuple[CandidateValidated, ...] = ()
    validation_failed: bool = False
    selected: int | None = None
    selected_score: float | None = None
    assessment_started: bool = False
    assessment_score: float | None = None
    assessment_failed: bool = False
    interrupted: bool = False
    resumes: int = 0
    finished: TerminalReason | None = None

    @property
    def created(self) -> bool:
        return self.config is not None

    @property
    def cfg(self) -> RunConfig:
        if self.config is None:
            raise InvalidTransition("the Run has not been created")
        return self.config

    @property
    def budget_left(self) -> int:
        return self.cfg.episode_budget - self.budget_used

    @property
    def pending(self) -> Submission | None:
        last = self.submissions[-1] if self.submissions else None
        return last if last is not None and last.status == "evaluating" else None

    @property
    def latest_program_digest(self) -> str:
        return (
            self.submissions[-1].program_digest if self.submissions else self.initial_program_digest
        )

    def submission(self, submission_id: int) -> Submission | None:
        if 1 <= submission_id <= len(self.submissions):
            return self.submissions[submission_id - 1]
        return None


# --------------------------------------------------------------------------- commands


class Command(msgspec.Struct, frozen=True, kw_only=True):
    pass


class Create(Command, frozen=True, kw_only=True):
    run_id: str
    config: RunConfig  # resolved
    benchmark_id: str
    benchmark_spec: dict[str, Any]
    environment_digest: str
    initial_program_digest: str
    agent: AgentIdentity
    pool: list[PoolEntry]
    seeds: dict[str, int]
    skill_program_digests: list[str] = []


class Submit(Command, frozen=True, kw_only=True):
    """The Agent's submit request; ``problem`` says why the program could not be captured."""

    request_id: str
    selector: str
    program_digest: str | None = None
    problem: str | None = None


class Malformed(Command, frozen=True, kw_only=True):
    """A Session request that is not a submit or finish of the right shape."""

    message: str


class Finish(Command, frozen=True, kw_only=True):
    request_id: str
    candidates: list[int]


class CompleteEvaluation(Command, frozen=True, kw_only=True):
    submission_id: int
    episodes: list[EpisodeCompleted]
    score: float
    failures: int
    content: dict[str, Any] = {}
    artifacts: list[ArtifactRef] = []


class FailEvaluation(Command, frozen=True, kw_only=True):
    submission_id: int
    error: str


class StartAgent(Command, frozen=True, kw_only=True):
    command: list[str] = []
    pid: int | None = None


class RecordMessages(Command, frozen=True, kw_only=True):
    messages: list[Message]
    raw_blob: str | None = None


class AgentExit(Command, frozen=True, kw_only=True):
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    stdout_blob: str | None = None
    stderr_blob: str | None = None


class StartValidation(Command, frozen=True, kw_only=True):
    pass


class RecordCandidate(Command, frozen=True, kw_only=True):
    submission_id: int
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []


class FailValidation(Command, frozen=True, kw_only=True):
    error: str


class Select(Command, frozen=True, kw_only=True):
    """Choose the final Submission without Validation (Validation disabled)."""


class StartAssessment(Command, frozen=True, kw_only=True):
    pass


class CompleteAssessment(Command, frozen=True, kw_only=True):
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []
    content: dict[str, Any] = {}


class FailAssessment(Command, frozen=True, kw_only=True):
    error: str


class Interrupt(Command, frozen=True, kw_only=True):
    reason: str
    last_position: int = 0


class Resume(Command, frozen=True, kw_only=True):
    pass


class Conclude(Command, frozen=True, kw_only=True):
    pass


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    message: str
    event: Event | None = None  # what the log keeps of a rejected Agent request

    def as_error(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


# --------------------------------------------------------------------------- decide


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
            parent_program_digest=state.latest_program_digest,
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
        return reject("invalid_request", "a Submission id is named twice")
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
                    seeds=command.seeds,
                    skill_program_digests=command.skill_program_digests,
                )
            ]
        case CompleteEvaluation():
            pending = _pending(state, command.submission_id)
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
            pending = _pending(state, command.submission_id)
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
                    attempt=state.agent_attempts + 1, command=command.command, pid=command.pid
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
                )
            ]
        case RecordCandidate():
            remaining = _unvalidated(state)
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
            return [
                RunFinished(
                    reason=terminal_reason(state),
                    final_submission_id=state.selected,
                    validation_score=state.selected_score if state.cfg.validation.enabled else None,
                    assessment_score=state.assessment_score,
                )
            ]
    raise InvalidTransition(f"unknown command {type(command).__name__}")


def _pending(state: RunState, submission_id: int) -> Submission:
    pending = state.pending
    if pending is None or pending.id != submission_id:
        raise InvalidTransition(f"Submission {submission_id} is not being evaluated")
    return pending


def _unvalidated(state: RunState) -> list[int]:
    if state.validation_candidates is None or state.selected is not None or state.validation_failed:
        return []
    done = {r.submission_id for r in state.validated}
    return [c for c in state.validation_candidates if c not in done]


# --------------------------------------------------------------------------- selection


def rank_candidates(results: Iterable[tuple[int, float, int]], direction: str) -> list[int]:
    """Submission ids best first: score in the Benchmark's direction, then fewer failures,
    then the order given (finish order)."""
    sign = -1.0 if direction == "maximize" else 1.0
    ordered = sorted(enumerate(results), key=lambda item: (sign * item[1][1], item[1][2], item[0]))
    return [result[0] for _, result in ordered]


def _nominated(state: RunState) -> tuple[int, ...]:
    """The candidates: the Agent's, or (when it never finished) its best published by train score."""
    if state.finish_candidates is not None:
        return state.finish_candidates
    published = [
        (s.id, s.score or 0.0, s.failures or 0)
        for s in state.submissions
        if s.status == "published"
    ]
    return tuple(
        rank_candidates(published, state.score_direction)[: state.cfg.validation.max_candidates]
    )


# --------------------------------------------------------------------------- what next


class Step(msgspec.Struct, frozen=True, kw_only=True):
    pass


class Evaluate(Step, frozen=True, kw_only=True):
    submission_id: int
    program_digest: str
    indices: tuple[int, ...]


class StopAgent(Step, frozen=True, kw_only=True):
    """Authority has closed; wait for the Agent to leave (then stop it)."""


class Validate(Step, frozen=True, kw_only=True):
    candidates: tuple[int, ...]


class Assess(Step, frozen=True, kw_only=True):
    submission_id: int


def next_step(state: RunState) -> Step | Command:
    """What the Run needs next: a Step for the service to carry out, or a Host command
    (StartAgent, Conclude) to decide now."""
    if state.finished is not None:
        return Conclude()
    pending = state.pending
    if pending is not None:
        return Evaluate(
            submission_id=pending.id, program_digest=pending.program_digest, indices=pending.indices
        )
    if state.authority_open:
        return StopAgent() if state.agent_running else StartAgent()
    if state.agent_running:
        return StopAgent()
    if state.evaluation_failed or state.validation_failed or state.assessment_failed:
        return Conclude()
    if state.selected is None:
        candidates = state.validation_candidates or _nominated(state)
        return Validate(candidates=candidates) if candidates else Conclude()
    if state.cfg.assessment.enabled and state.assessment_score is None:
        return Assess(submission_id=state.selected)
    return Conclude()


def terminal_reason(state: RunState) -> TerminalReason:
    if state.evaluation_failed:
        return "evaluation_failed"
    if state.validation_failed:
        return "validation_failed"
    if state.assessment_failed:
        return "assessment_failed"
    if state.finish_candidates is not None:
        return "finished"
    if state.created and state.budget_left == 0:
        return "budget_exhausted"
    last = state.agent_exits[-1] if state.agent_exits else None
    if last is None or last.exit_code != 0 or last.signal is not None:
        return "agent_failed"
    return "agent_exited"


# --------------------------------------------------------------------------- evolve


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
            config = RunConfig.from_dict(event.config)
            return replace(
                state,
                run_id=event.run_id,
                config=config,
                score_direction=str(event.benchmark_spec.get("score_direction", "maximize")),
                initial_program_digest=event.initial_program_digest,
                pool=tuple(event.pool),
                seeds=dict(event.seeds),
                authority_open=True,
            )
        case EvaluationStarted():
            # Exactly what decide() answers to the same request, or refused: limits, budget
            # allocation, duplicates and the parent all follow from the state.
            again = _submit(
                state,
                Submit(
                    request_id="",
                    selector=format_selector(list(event.indices)),
                    program_digest=event.program_digest,
                ),
            )
            if not isinstance(again, list) or again != [event]:
                reason = again.message if isinstance(again, Rejection) else "it differs from what the rules give"
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
            pending = _pending(state, event.submission_id)
            if pending.completed >= len(pending.indices) or event.index != pending.indices[pending.completed]:
                raise InvalidTransition(
                    f"EpisodeCompleted for Episode {event.index} of Submission {pending.id} out of order"
                )
            done = replace(pending, completed=pending.completed + 1)
            return replace(state, submissions=(*state.submissions[:-1], done))
        case SubmissionPublished():
            pending = _pending(state, event.submission_id)
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
            pending = _pending(state, event.submission_id)
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
            again = _finish(state, Finish(request_id=event.request_id, candidates=list(event.candidates)))
            if isinstance(again, Rejection):
                raise InvalidTransition(f"FinishAccepted could not have been accepted: {again.message}")
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
            return replace(state, validation_candidates=tuple(event.candidates))
        case CandidateValidated():
            remaining = _unvalidated(state)
            if not remaining or remaining[0] != event.submission_id:
                raise InvalidTransition(f"CandidateValidated {event.submission_id} out of order")
            return replace(state, validated=(*state.validated, event))
        case ValidationFailed():
            if state.validation_candidates is None or state.selected is not None or state.validation_failed:
                raise InvalidTransition("ValidationFailed with no Validation running")
            return replace(state, validation_failed=True)
        case FinalSubmissionSelected():
            step = next_step(state)
            if state.selected is not None or not isinstance(step, Validate):
                raise InvalidTransition("FinalSubmissionSelected out of turn")
            if state.cfg.validation.enabled:
                results = [(r.submission_id, r.score, r.failures) for r in state.validated]
                if _unvalidated(state) or not results:
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
            return replace(state, selected=event.submission_id, selected_score=event.score)
        case AssessmentStarted():
            _as_decided(state, StartAssessment(), event)
            return replace(state, assessment_started=True)
        case AssessmentCompleted() | AssessmentFailed():
            if not state.assessment_started or state.assessment_score is not None or state.assessment_failed:
                raise InvalidTransition(f"{event.type_name()} with no Assessment running")
            if isinstance(event, AssessmentFailed):
                return replace(state, assessment_failed=True)
            return replace(state, assessment_score=event.score)
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
    try:
        expected = _host(state, command)
    except InvalidTransition as exc:
        raise InvalidTransition(f"{event.type_name()} could not have been recorded here: {exc}") from exc
    if expected != [event]:
        raise InvalidTransition(f"{event.type_name()} differs from what the rules give in this state")


def fold(events: Iterable[Event], state: RunState | None = None) -> RunState:
    """The state after ``events`` (from the empty state, or from ``state``)."""
    state = state or RunState()
    for event in events:
        state = evolve(state, event)
    return state
