"""What the Run needs next (``next_step``) and how it ended (``terminal_reason``).

A ``Step`` is work for the Host to carry out (evaluate, stop the Agent, validate,
assess); ``next_step`` answers with one, or with a Host command to decide now.
With it, resuming is just folding and continuing.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from evopolicygym.records.events import TerminalReason
from evopolicygym.records.runs import better
from evopolicygym.run.decider.commands import Command, Conclude, StartAgent
from evopolicygym.run.decider.selection import nominated
from evopolicygym.run.decider.state import RunState, unassessed

__all__ = [
    "Assess",
    "Evaluate",
    "Step",
    "StopAgent",
    "Validate",
    "handoff",
    "improved",
    "next_step",
    "terminal_reason",
]


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
    reference: bool = False  # the initial Program is to be validated first (rules 2)


class Assess(Step, frozen=True, kw_only=True):
    """Assess the selected Submission; once that is done, with ``assessment.candidates``,
    the other validated ``candidates`` still due, on the same Episodes."""

    submission_id: int
    candidates: tuple[int, ...] = ()


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
        candidates = state.validation_candidates or nominated(state)
        if not candidates:
            return Conclude()
        return Validate(
            candidates=candidates,
            reference=state.cfg.validation.enabled
            and not state.cfg.legacy
            and not state.reference_validated,
        )
    if state.cfg.assessment.enabled and state.assessment_score is None:
        return Assess(submission_id=state.selected)
    remaining = unassessed(state)
    if remaining:
        return Assess(submission_id=state.selected, candidates=tuple(remaining))
    return Conclude()


def handoff(state: RunState) -> Literal["agent", "host", "none"]:
    """Who named the candidates: the Agent, the Host (nomination), or nobody."""
    if state.finish_candidates is not None:
        return "agent"
    return (
        "host" if state.validation_candidates is not None or state.selected is not None else "none"
    )


def improved(state: RunState) -> bool | None:
    """Whether the final Program beat the initial one on the same Validation Episodes;
    None where that was not measured (no final Program, no Validation, rules 1)."""
    if state.selected is None or state.reference_score is None or state.selected_score is None:
        return None
    return better(state.selected_score, state.reference_score, state.score_direction)


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
