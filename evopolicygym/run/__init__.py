"""The Run use case: config, pool, decider, creation, the Host (ledger, phases, Agent
supervisor, session gateway, workspace publication) and the launcher interface.

Re-exported lazily: importing one small module (``run.config`` for a RunConfig, say)
does not pay for the evaluation engine.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AssessmentConfig": "evopolicygym.run.config",
    "FeedbackConfig": "evopolicygym.run.config",
    "RunConfig": "evopolicygym.run.config",
    "RunConfigError": "evopolicygym.run.config",
    "ValidationConfig": "evopolicygym.run.config",
    "create_run": "evopolicygym.run.create",
    "REJECTION_CODES": "evopolicygym.run.decider",
    "InvalidTransition": "evopolicygym.run.decider",
    "Rejection": "evopolicygym.run.decider",
    "RunState": "evopolicygym.run.decider",
    "Submission": "evopolicygym.run.decider",
    "decide": "evopolicygym.run.decider",
    "evolve": "evopolicygym.run.decider",
    "fold": "evopolicygym.run.decider",
    "next_step": "evopolicygym.run.decider",
    "RunHost": "evopolicygym.run.host",
    "Launcher": "evopolicygym.run.launcher",
    "RunError": "evopolicygym.run.ledger",
    "load_run": "evopolicygym.run.ledger",
    "RunBusy": "evopolicygym.run.liveness",
    "host_alive": "evopolicygym.run.liveness",
    "derive_run_seeds": "evopolicygym.run.pool",
    "plan_pool": "evopolicygym.run.pool",
    "reevaluate": "evopolicygym.run.reevaluation",
    "replay_run": "evopolicygym.run.replay",
    "SessionServer": "evopolicygym.run.session_server",
    "build_feedback": "evopolicygym.run.workspace",
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
