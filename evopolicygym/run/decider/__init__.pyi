# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.run.decider.commands import HOST_INTERRUPTED as HOST_INTERRUPTED
from evopolicygym.run.decider.commands import REJECTION_CODES as REJECTION_CODES
from evopolicygym.run.decider.commands import AgentExit as AgentExit
from evopolicygym.run.decider.commands import AssessCandidate as AssessCandidate
from evopolicygym.run.decider.commands import Command as Command
from evopolicygym.run.decider.commands import CompleteAssessment as CompleteAssessment
from evopolicygym.run.decider.commands import CompleteEvaluation as CompleteEvaluation
from evopolicygym.run.decider.commands import Conclude as Conclude
from evopolicygym.run.decider.commands import Create as Create
from evopolicygym.run.decider.commands import FailAssessment as FailAssessment
from evopolicygym.run.decider.commands import FailEvaluation as FailEvaluation
from evopolicygym.run.decider.commands import FailValidation as FailValidation
from evopolicygym.run.decider.commands import Finish as Finish
from evopolicygym.run.decider.commands import Interrupt as Interrupt
from evopolicygym.run.decider.commands import InvalidTransition as InvalidTransition
from evopolicygym.run.decider.commands import Malformed as Malformed
from evopolicygym.run.decider.commands import RecordCandidate as RecordCandidate
from evopolicygym.run.decider.commands import RecordMessages as RecordMessages
from evopolicygym.run.decider.commands import RecordReference as RecordReference
from evopolicygym.run.decider.commands import Rejection as Rejection
from evopolicygym.run.decider.commands import Resume as Resume
from evopolicygym.run.decider.commands import Select as Select
from evopolicygym.run.decider.commands import StartAgent as StartAgent
from evopolicygym.run.decider.commands import StartAssessment as StartAssessment
from evopolicygym.run.decider.commands import StartValidation as StartValidation
from evopolicygym.run.decider.commands import Submit as Submit
from evopolicygym.run.decider.decision import decide as decide
from evopolicygym.run.decider.evolution import evolve as evolve
from evopolicygym.run.decider.evolution import fold as fold
from evopolicygym.run.decider.selection import rank_candidates as rank_candidates
from evopolicygym.run.decider.state import RunState as RunState
from evopolicygym.run.decider.state import Submission as Submission
from evopolicygym.run.decider.steps import Assess as Assess
from evopolicygym.run.decider.steps import Evaluate as Evaluate
from evopolicygym.run.decider.steps import Step as Step
from evopolicygym.run.decider.steps import StopAgent as StopAgent
from evopolicygym.run.decider.steps import Validate as Validate
from evopolicygym.run.decider.steps import next_step as next_step
from evopolicygym.run.decider.steps import terminal_reason as terminal_reason

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
