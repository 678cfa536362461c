# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.agents.launcher import ProviderLauncher as ProviderLauncher
from evopolicygym.agents.providers import PROVIDERS as PROVIDERS
from evopolicygym.agents.providers import AgentError as AgentError
from evopolicygym.agents.providers import AgentLaunch as AgentLaunch
from evopolicygym.agents.providers import Provider as Provider
from evopolicygym.agents.providers import agent_identity as agent_identity
from evopolicygym.agents.providers import launch_for as launch_for

__all__ = [
    "PROVIDERS",
    "AgentError",
    "AgentLaunch",
    "Provider",
    "ProviderLauncher",
    "agent_identity",
    "launch_for",
]
