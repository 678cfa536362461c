"""The Run as a decider: ``decide(state, command)`` and ``evolve(state, event)``, pure.

``decide`` checks a command against the state and answers with the events that
record it, or a ``Rejection`` (which, for the Agent's requests, carries the
rejection event that the log keeps too). ``evolve`` folds one event into the
state and refuses an event the rules could not have produced, so folding a
stream also verifies it. ``next_step`` tells the Host what the Run needs
next; with it, resuming is just folding and continuing.

No I/O here: programs, evaluations and clocks live in the Host. The parts:
``state`` (RunState, Submission), ``commands`` (the Command structs, Rejection,
REJECTION_CODES, InvalidTransition), ``decide``, ``evolve`` (and ``fold``),
``selection`` (ranking and nomination of candidates) and ``steps`` (``next_step``,
``terminal_reason``). Each command and each event has one small function for its rule
of the Run (DESIGN §4.2), found through a table by type (``dispatch``): the Agent's
requests in ``agent_requests``, the Host's commands in ``host_commands``, the events'
folds in ``evolve``.
"""

from __future__ import annotations

from evopolicygym.run.decider.commands import (
    HOST_INTERRUPTED,
    REJECTION_CODES,
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
from evopolicygym.run.decider.decide import decide
from evopolicygym.run.decider.evolve import evolve, fold
from evopolicygym.run.decider.selection import rank_candidates
from evopolicygym.run.decider.state import RunState, Submission
from evopolicygym.run.decider.steps import (
    Assess,
    Evaluate,
    Step,
    StopAgent,
    Validate,
    next_step,
    terminal_reason,
)

__all__ = [
    "HOST_INTERRUPTED",
    "REJECTION_CODES",
    "AgentExit",
    "Assess",
    "AssessCandidate",
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
    "RecordReference",
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
