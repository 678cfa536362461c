"""The Run use case: config, pool, decider, creation, the Host (ledger, phases, Agent
supervisor, session gateway, workspace publication) and the launcher interface.

Re-exported lazily: importing one small module (``run.config`` for a RunConfig, say)
does not pay for the evaluation engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy exports are, for type checkers
    from evopolicygym.run.config import (
        AssessmentConfig,
        FeedbackConfig,
        RunConfig,
        RunConfigError,
        ValidationConfig,
    )
    from evopolicygym.run.create import create_run
    from evopolicygym.run.decider import (
        REJECTION_CODES,
        InvalidTransition,
        Rejection,
        RunState,
        Submission,
        decide,
        evolve,
        fold,
        next_step,
    )
    from evopolicygym.run.host import RunHost
    from evopolicygym.run.launcher import Launcher
    from evopolicygym.run.ledger import RunError, load_run
    from evopolicygym.run.liveness import RunBusy, host_alive
    from evopolicygym.run.pool import derive_run_seeds, plan_pool
    from evopolicygym.run.reevaluate import reevaluate
    from evopolicygym.run.replay import replay_run
    from evopolicygym.run.session import SessionServer
    from evopolicygym.run.workspace import build_feedback

_EXPORTS = {
    "AssessmentConfig": "evopolicygym.run.config",
    "FeedbackConfig": "evopolicygym.run.config",
    "RunConfig": "evopolicygym.run.config",
    "RunConfigError": "evopolicygym.run.config",
    "ValidationConfig": "evopolicygym.run.config",
    "REJECTION_CODES": "evopolicygym.run.decider",
    "InvalidTransition": "evopolicygym.run.decider",
    "Rejection": "evopolicygym.run.decider",
    "RunState": "evopolicygym.run.decider",
    "Submission": "evopolicygym.run.decider",
    "decide": "evopolicygym.run.decider",
    "evolve": "evopolicygym.run.decider",
    "fold": "evopolicygym.run.decider",
    "next_step": "evopolicygym.run.decider",
    "RunBusy": "evopolicygym.run.liveness",
    "host_alive": "evopolicygym.run.liveness",
    "derive_run_seeds": "evopolicygym.run.pool",
    "plan_pool": "evopolicygym.run.pool",
    "reevaluate": "evopolicygym.run.reevaluate",
    "replay_run": "evopolicygym.run.replay",
    "RunError": "evopolicygym.run.ledger",
    "RunHost": "evopolicygym.run.host",
    "create_run": "evopolicygym.run.create",
    "load_run": "evopolicygym.run.ledger",
    "Launcher": "evopolicygym.run.launcher",
    "SessionServer": "evopolicygym.run.session",
    "build_feedback": "evopolicygym.run.workspace",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym.run' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
