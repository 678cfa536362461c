# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.run.config import AssessmentConfig as AssessmentConfig
from evopolicygym.run.config import FeedbackConfig as FeedbackConfig
from evopolicygym.run.config import RunConfig as RunConfig
from evopolicygym.run.config import RunConfigError as RunConfigError
from evopolicygym.run.config import ValidationConfig as ValidationConfig
from evopolicygym.run.create import create_run as create_run
from evopolicygym.run.decider import REJECTION_CODES as REJECTION_CODES
from evopolicygym.run.decider import InvalidTransition as InvalidTransition
from evopolicygym.run.decider import Rejection as Rejection
from evopolicygym.run.decider import RunState as RunState
from evopolicygym.run.decider import Submission as Submission
from evopolicygym.run.decider import decide as decide
from evopolicygym.run.decider import evolve as evolve
from evopolicygym.run.decider import fold as fold
from evopolicygym.run.decider import next_step as next_step
from evopolicygym.run.host import RunHost as RunHost
from evopolicygym.run.launcher import Launcher as Launcher
from evopolicygym.run.ledger import RunError as RunError
from evopolicygym.run.ledger import load_run as load_run
from evopolicygym.run.liveness import RunBusy as RunBusy
from evopolicygym.run.liveness import host_alive as host_alive
from evopolicygym.run.pool import derive_run_seeds as derive_run_seeds
from evopolicygym.run.pool import plan_pool as plan_pool
from evopolicygym.run.reevaluation import reevaluate as reevaluate
from evopolicygym.run.replay import replay_run as replay_run
from evopolicygym.run.session_server import SessionServer as SessionServer
from evopolicygym.run.workspace import build_feedback as build_feedback

__all__ = [
    "REJECTION_CODES",
    "AssessmentConfig",
    "FeedbackConfig",
    "InvalidTransition",
    "Launcher",
    "Rejection",
    "RunBusy",
    "RunConfig",
    "RunConfigError",
    "RunError",
    "RunHost",
    "RunState",
    "SessionServer",
    "Submission",
    "ValidationConfig",
    "build_feedback",
    "create_run",
    "decide",
    "derive_run_seeds",
    "evolve",
    "fold",
    "host_alive",
    "load_run",
    "next_step",
    "plan_pool",
    "reevaluate",
    "replay_run",
]
