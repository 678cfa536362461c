"""The Run as a decider: ``decide(state, command)`` and ``evolve(state, event)``, pure.

``decide`` checks a command against the state and answers with the events that
record it, or a ``Rejection`` (which, for the Agent's requests, carries the
rejection event that the log keeps too). ``evolve`` folds one event into the
state and refuses an event the rules could not have produced, so folding a
stream also verifies it. ``next_step`` tells the Host what the Run needs
next; with it, resuming is just folding and continuing.

No I/O here: programs, evaluations and clocks live in the Host. The parts:
``state`` (RunState, Submission), ``commands`` (the Command structs, Rejection,
REJECTION_CODES, InvalidTransition), ``decision`` (``decide``), ``evolution``
(``evolve`` and ``fold``), ``selection`` (ranking and nomination of candidates) and
``steps`` (``next_step``, ``terminal_reason``). Each command and each event has one small
function for its rule of the Run (DESIGN §4.2), found through a table by type
(``dispatch``): the Agent's requests in ``agent_requests``, the Host's commands in
``host_commands``, the events' folds in ``evolution``. (No module is named for an export:
the import system would bind the module over the lazy name.)
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "HOST_INTERRUPTED": "evopolicygym.run.decider.commands",
    "REJECTION_CODES": "evopolicygym.run.decider.commands",
    "AgentExit": "evopolicygym.run.decider.commands",
    "AssessCandidate": "evopolicygym.run.decider.commands",
    "Command": "evopolicygym.run.decider.commands",
    "CompleteAssessment": "evopolicygym.run.decider.commands",
    "CompleteEvaluation": "evopolicygym.run.decider.commands",
    "Conclude": "evopolicygym.run.decider.commands",
    "Create": "evopolicygym.run.decider.commands",
    "FailAssessment": "evopolicygym.run.decider.commands",
    "FailEvaluation": "evopolicygym.run.decider.commands",
    "FailValidation": "evopolicygym.run.decider.commands",
    "Finish": "evopolicygym.run.decider.commands",
    "Interrupt": "evopolicygym.run.decider.commands",
    "InvalidTransition": "evopolicygym.run.decider.commands",
    "Malformed": "evopolicygym.run.decider.commands",
    "RecordCandidate": "evopolicygym.run.decider.commands",
    "RecordMessages": "evopolicygym.run.decider.commands",
    "RecordReference": "evopolicygym.run.decider.commands",
    "Rejection": "evopolicygym.run.decider.commands",
    "Resume": "evopolicygym.run.decider.commands",
    "Select": "evopolicygym.run.decider.commands",
    "StartAgent": "evopolicygym.run.decider.commands",
    "StartAssessment": "evopolicygym.run.decider.commands",
    "StartValidation": "evopolicygym.run.decider.commands",
    "Submit": "evopolicygym.run.decider.commands",
    "decide": "evopolicygym.run.decider.decision",
    "evolve": "evopolicygym.run.decider.evolution",
    "fold": "evopolicygym.run.decider.evolution",
    "rank_candidates": "evopolicygym.run.decider.selection",
    "RunState": "evopolicygym.run.decider.state",
    "Submission": "evopolicygym.run.decider.state",
    "Assess": "evopolicygym.run.decider.steps",
    "Evaluate": "evopolicygym.run.decider.steps",
    "Step": "evopolicygym.run.decider.steps",
    "StopAgent": "evopolicygym.run.decider.steps",
    "Validate": "evopolicygym.run.decider.steps",
    "next_step": "evopolicygym.run.decider.steps",
    "terminal_reason": "evopolicygym.run.decider.steps",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
