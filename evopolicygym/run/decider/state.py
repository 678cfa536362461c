"""The Run's state as the decider folds it: ``RunState`` and its ``Submission``s.

Also the two lookups that both ``decide`` and ``evolve`` make of it: the Submission
being evaluated, and the candidates still to validate.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from evopolicygym.records.events import (
    AgentExited,
    CandidateAssessed,
    CandidateValidated,
    PoolEntry,
    TerminalReason,
)
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider.commands import InvalidTransition

__all__ = [
    "RunState",
    "Submission",
    "pending_submission",
    "reference_due",
    "unassessed",
    "unvalidated",
]


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
    pool_blob: str | None = None  # the Episode pool's manifest blob (records.pools)
    pool: tuple[PoolEntry, ...] = ()  # the pool inline, as Runs recorded before pool_blob hold it
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
    handoff: str | None = None  # who named the candidates: "agent" or "host" (rules 2)
    reference_score: float | None = None  # the initial Program's Validation score (rules 2)
    reference_validated: bool = False
    validated: tuple[CandidateValidated, ...] = ()
    validation_failed: bool = False
    selected: int | None = None
    selected_score: float | None = None
    assessment_started: bool = False
    assessment_score: float | None = None
    assessment_failed: bool = False
    candidates_assessed: tuple[CandidateAssessed, ...] = ()  # assessment.candidates, in order
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


def pending_submission(state: RunState, submission_id: int) -> Submission:
    pending = state.pending
    if pending is None or pending.id != submission_id:
        raise InvalidTransition(f"Submission {submission_id} is not being evaluated")
    return pending


def reference_due(state: RunState) -> bool:
    """Whether Validation must still run the initial Program as its reference (rules 2:
    first, before any candidate)."""
    return (
        state.validation_candidates is not None
        and not state.cfg.legacy
        and not state.reference_validated
        and state.selected is None
        and not state.validation_failed
    )


def unvalidated(state: RunState) -> list[int]:
    if state.validation_candidates is None or state.selected is not None or state.validation_failed:
        return []
    done = {r.submission_id for r in state.validated}
    return [c for c in state.validation_candidates if c not in done]


def unassessed(state: RunState) -> list[int]:
    """The validated candidates other than the selected one still to be assessed on the
    selected one's Assessment Episodes (``assessment.candidates``), in Validation order;
    only once the selected one's Assessment has completed."""
    if (
        not state.cfg.assessment.candidates
        or state.assessment_score is None
        or state.selected is None
    ):
        return []
    done = {a.submission_id for a in state.candidates_assessed}
    return [
        r.submission_id
        for r in state.validated
        if r.submission_id != state.selected and r.submission_id not in done
    ]
