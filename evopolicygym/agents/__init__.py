"""Agents: the providers a Run can start and what their output becomes.

``providers`` turns an agent identity into a command line and environment
(``reference``, ``chat``, ``codex``, ``claude-code``, ``kimi``, ``qoder``,
``command``); ``streams`` parses each provider's stdout into normalized
transcript messages; ``message_redaction`` replaces secrets before anything is recorded;
``process`` supervises the running Agent and ``jail`` contains it; ``chat`` is
the built-in OpenAI-compatible harness and ``reference`` the offline agent.

The two built-in agents share ``session_client`` (``evopolicy session submit`` and
``finish`` through ``$EVOPOLICY_CLI``) and ``transcript_writer`` (their stdout
transcript). ``chat`` keeps its model API in ``chat_client`` and its tools in
``chat_tools``; ``reference`` keeps its search in ``reference_search``, its budget
plan in ``reference_budget`` and its program edits in ``edits``.

``launcher.ProviderLauncher`` is what a ``RunHost`` is given to start these Agents
(``run`` defines the interface and never imports this package). Names load on first
use, so a built-in agent's own start-up does not pay for the Host's side.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ProviderLauncher": "evopolicygym.agents.launcher",
    "PROVIDERS": "evopolicygym.agents.providers",
    "AgentError": "evopolicygym.agents.providers",
    "AgentLaunch": "evopolicygym.agents.providers",
    "Provider": "evopolicygym.agents.providers",
    "agent_identity": "evopolicygym.agents.providers",
    "launch_for": "evopolicygym.agents.providers",
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
