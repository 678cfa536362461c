"""The Run use case: config, pool, decider, session gateway, workspace, selection, service.

Re-exported lazily: the Agent-facing `evopolicy session` client imports
``evopolicygym.run.session`` and must not pay for the evaluation engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AssessmentConfig": "evopolicygym.run.config",
    "RunConfig": "evopolicygym.run.config",
    "RunConfigError": "evopolicygym.run.config",
    "ValidationConfig": "evopolicygym.run.config",
    "REJECTION_CODES": "evopolicygym.run.decider",
    "InvalidTransition": "evopolicygym.run.decider",
    "Rejection": "evopolicygym.run.decider",
    "RunState": "evopolicygym.run.decider",
    "decide": "evopolicygym.run.decider",
    "evolve": "evopolicygym.run.decider",
    "fold": "evopolicygym.run.decider",
    "next_step": "evopolicygym.run.decider",
    "RunBusy": "evopolicygym.run.liveness",
    "host_alive": "evopolicygym.run.liveness",
    "derive_run_seeds": "evopolicygym.run.pool",
    "plan_pool": "evopolicygym.run.pool",
    "reevaluate": "evopolicygym.run.replay",
    "replay_run": "evopolicygym.run.replay",
    "RunError": "evopolicygym.run.service",
    "RunHost": "evopolicygym.run.service",
    "create_run": "evopolicygym.run.service",
    "load_run": "evopolicygym.run.service",
    "SessionServer": "evopolicygym.run.session",
    "build_feedback": "evopolicygym.run.workspace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym.run' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
