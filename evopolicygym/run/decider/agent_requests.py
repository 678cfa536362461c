"""The Agent's requests (``Submit``, ``Finish``, ``Malformed``): accepted, or refused.

A refused request answers with a ``Rejection`` that has a stable code (DESIGN §4.2:
"every rejection has a stable code, a human message, and an event in the log") and
consumes nothing. Each request's checks run in a fixed order, so the same request in
the same state is always refused with the same code. ``AGENT_REQUESTS`` maps each
request to its rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from evopolicygym.protocol import SelectorError, parse_selector
from evopolicygym.records.events import (
    EvaluationStarted,
    Event,
    FinishAccepted,
    FinishRejected,
    SubmissionRejected,
)
from evopolicygym.run.decider.commands import Command, Finish, Malformed, Rejection, Submit
from evopolicygym.run.decider.state import RunState

__all__ = ["AGENT_REQUESTS", "AgentRequestRule"]

AgentRequestRule = Callable[[RunState, Any], list[Event] | Rejection]


class Refusal(NamedTuple):
    code: str
    message: str


def _stream_closed(state: RunState) -> bool:
    # Nothing to record on a stream that does not exist yet, has ended, or whose Host is
    # going down: only RunResumed may follow RunInterrupted.
    return not state.created or state.finished is not None or state.interrupted


def _run_ended() -> Rejection:
    return Rejection(code="session_closed", message="the session is closed: the Run has ended")


def _session_refusal(state: RunState, closed: str) -> Refusal | None:
    """Rule: the Agent acts only while it holds the session, one evaluation at a time."""
    if not state.authority_open:
        return Refusal("session_closed", f"the session is closed: {closed}")
    if state.pending is not None:
        return Refusal("invalid_request", f"Submission {state.pending.id} is still being evaluated")
    return None


# --------------------------------------------------------------------------- submit


def _refuse_submit(command: Submit, refusal: Refusal) -> Rejection:
    code, message = refusal
    event = SubmissionRejected(
        request_id=command.request_id,
        code=code,
        message=message,
        program_digest=command.program_digest,
        selector=command.selector[:1000],
    )
    return Rejection(code=code, message=message, event=event)


def _parent_refusal(state: RunState, parent: int | None) -> Refusal | None:
    """Rule: the Submission the Agent says it edited exists (0: the initial program)."""
    if parent is None or parent == 0 or state.submission(parent) is not None:
        return None
    return Refusal(
        "invalid_request", f"--parent {parent}: no such Submission (0 is the initial program)"
    )


def _parent_digest(state: RunState, parent: int | None) -> str:
    """The program edited from: the one the Agent names, else the latest one."""
    if parent is None:
        return state.latest_program_digest
    if parent == 0:
        return state.initial_program_digest
    stated = state.submission(parent)
    return state.latest_program_digest if stated is None else stated.program_digest


def _pool_refusal(state: RunState, indices: list[int]) -> Refusal | None:
    """Rule: a Submission's Episodes are indices into the Run's pool."""
    pool_size = state.cfg.pool_size
    if indices[-1] >= pool_size:
        return Refusal(
            "invalid_request",
            f"Episode index {indices[-1]} is outside the pool (indices 0..{pool_size - 1})",
        )
    return None


def _limit_refusal(state: RunState, count: int) -> Refusal | None:
    """Rule: max_episodes_per_submission and max_submissions (``episode_limit``,
    ``submission_limit``)."""
    config = state.cfg
    if count > config.episode_limit:
        return Refusal(
            "episode_limit",
            f"{count} Episodes requested; at most {config.episode_limit} per submission",
        )
    if len(state.submissions) >= config.submission_limit:
        return Refusal(
            "submission_limit", f"all {config.submission_limit} submissions have been used"
        )
    return None


def _budget_refusal(state: RunState, count: int) -> Refusal | None:
    """Rule: the Episode budget (``budget_exhausted``, ``budget_allocation``); under
    ``require_budget_exhaustion`` no split may leave the budget unspendable."""
    config = state.cfg
    left = state.budget_left
    if left == 0:
        return Refusal(
            "budget_exhausted", f"the Episode budget of {config.episode_budget} is spent"
        )
    if count > left:
        return Refusal(
            "budget_allocation", f"{count} Episodes requested but only {left} left in the budget"
        )
    if config.finish_budget_policy == "require_budget_exhaustion":
        submissions_after = config.submission_limit - len(state.submissions) - 1
        if left - count > submissions_after * config.episode_limit:
            return Refusal(
                "budget_allocation",
                f"after {count} Episodes, {left - count} would be left for {submissions_after} "
                f"submissions of at most {config.episode_limit}: the budget could never be spent, "
                "which this Run requires",
            )
    return None


def _repeat_refusal(state: RunState, digest: str, indices: list[int]) -> Refusal | None:
    """Rule: rules 1 refused the same program on the same Episodes (``duplicate_submission``);
    rules 2 charge a repeat like any Submission (matched evidence is the point of reuse)."""
    if not state.cfg.legacy:
        return None
    key = tuple(indices)
    for previous in state.submissions:
        if (
            previous.status != "failed"
            and previous.program_digest == digest
            and previous.indices == key
        ):
            return Refusal(
                "duplicate_submission",
                f"this program was already evaluated on these Episodes (Submission {previous.id})",
            )
    return None


def _submit(state: RunState, command: Submit) -> list[Event] | Rejection:
    """Rule: budget is reserved before evaluation; a submit that passes every check
    reserves its Episodes (``EvaluationStarted``), any other consumes nothing."""
    if _stream_closed(state):
        return _run_ended()
    refusal = _session_refusal(state, "no more submissions in this Run")
    if refusal is not None:
        return _refuse_submit(command, refusal)
    digest = command.program_digest
    if command.problem is not None or digest is None:  # rule: a program with a policy.py
        problem = command.problem or "no program sent"
        return _refuse_submit(command, Refusal("program_invalid", f"program rejected: {problem}"))
    try:
        indices = parse_selector(command.selector)  # rule: the selector syntax
    except SelectorError as exc:
        return _refuse_submit(command, Refusal("invalid_request", f"--episodes: {exc}"))
    count = len(indices)
    refusal = (
        _parent_refusal(state, command.parent)
        or _pool_refusal(state, indices)
        or _limit_refusal(state, count)
        or _budget_refusal(state, count)
        or _repeat_refusal(state, digest, indices)
    )
    if refusal is not None:
        return _refuse_submit(command, refusal)
    return [
        EvaluationStarted(
            submission_id=len(state.submissions) + 1,
            program_digest=digest,
            parent_program_digest=_parent_digest(state, command.parent),
            parent_submission_id=command.parent,
            indices=indices,
            budget_reserved=count,
            budget_used=state.budget_used + count,
        )
    ]


# --------------------------------------------------------------------------- finish


def _candidates_refusal(state: RunState, candidates: list[int]) -> Refusal | None:
    """Rule: a finish names one to max_candidates distinct published Submissions
    (``duplicate_submission`` is the same id twice in one finish)."""
    if not candidates:
        return Refusal("invalid_request", "name at least one Submission id to finish with")
    if len(set(candidates)) != len(candidates):
        return Refusal("duplicate_submission", "a Submission id is named twice")
    most = state.cfg.validation.max_candidates
    if len(candidates) > most:
        return Refusal("candidate_limit", f"{len(candidates)} candidates named; at most {most}")
    for candidate in candidates:
        found = state.submission(candidate)
        if found is None or found.status != "published":
            return Refusal("unknown_submission", f"no published Submission with id {candidate}")
    return None


def _budget_remaining(state: RunState) -> Refusal | None:
    """Rule: finish_budget_policy ``require_budget_exhaustion`` (``budget_remaining``)."""
    if state.cfg.finish_budget_policy == "require_budget_exhaustion" and state.budget_left > 0:
        return Refusal(
            "budget_remaining",
            f"{state.budget_left} Episodes of budget are left; this Run requires spending them all "
            "before finishing",
        )
    return None


def _finish(state: RunState, command: Finish) -> list[Event] | Rejection:
    """Rule: candidates come only from an accepted finish (the Agent's handoff), which ends
    the Agent's session."""
    if _stream_closed(state):
        return _run_ended()
    refusal = (
        _session_refusal(state, "the Run no longer takes a finish")
        or _candidates_refusal(state, command.candidates)
        or _budget_remaining(state)
    )
    if refusal is not None:
        code, message = refusal
        event = FinishRejected(
            request_id=command.request_id,
            code=code,
            message=message,
            candidates=command.candidates[:1000],
        )
        return Rejection(code=code, message=message, event=event)
    return [FinishAccepted(request_id=command.request_id, candidates=list(command.candidates))]


# --------------------------------------------------------------------------- malformed


def _malformed(state: RunState, command: Malformed) -> list[Event] | Rejection:
    """Rule: a request of no known shape is ``invalid_request``, kept in the log while the
    Run is live."""
    message = f"malformed request: {command.message}"[:1000]
    if _stream_closed(state):
        return Rejection(code="invalid_request", message=message)
    event = SubmissionRejected(request_id="", code="invalid_request", message=message)
    return Rejection(code="invalid_request", message=message, event=event)


AGENT_REQUESTS: dict[type[Command], AgentRequestRule] = {
    Submit: _submit,
    Finish: _finish,
    Malformed: _malformed,
}
