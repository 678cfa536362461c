"""Agents: the providers a Run can start and what their output becomes.

``providers`` turns an agent identity into a command line and environment
(``reference``, ``chat``, ``codex``, ``claude-code``, ``kimi``, ``qoder``,
``command``); ``streams`` parses each provider's stdout into normalized
transcript messages; ``redact`` replaces secrets before anything is recorded;
``process`` supervises the running Agent and ``jail`` contains it; ``chat`` is
the built-in OpenAI-compatible harness and ``reference`` the offline agent.

The two built-in agents share ``session_client`` (``evopolicy session submit`` and
``finish`` through ``$EVOPOLICY_CLI``) and ``transcript_writer`` (their stdout
transcript). ``chat`` keeps its model API in ``chat_client`` and its tools in
``chat_tools``; ``reference`` keeps its search in ``reference_search``, its budget
plan in ``reference_budget`` and its program edits in ``edits``.

``launcher.ProviderLauncher`` is what a ``RunHost`` is given to start these Agents
(``run`` defines the interface and never imports this package); it is loaded on
first use, so a built-in agent's own start-up does not pay for the Host's side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evopolicygym.agents.providers import (
    PROVIDERS,
    AgentError,
    AgentLaunch,
    Provider,
    agent_identity,
    launch_for,
)

if TYPE_CHECKING:
    from evopolicygym.agents.launcher import ProviderLauncher

__all__ = [
    "PROVIDERS",
    "AgentError",
    "AgentLaunch",
    "Provider",
    "ProviderLauncher",
    "agent_identity",
    "launch_for",
]


def __getattr__(name: str) -> Any:
    if name == "ProviderLauncher":
        from evopolicygym.agents.launcher import ProviderLauncher

        return ProviderLauncher
    raise AttributeError(f"module 'evopolicygym.agents' has no attribute {name!r}")
