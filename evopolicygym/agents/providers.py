"""Agent providers: how an AgentIdentity becomes a command line and an environment.

``reference`` is the built-in offline agent; ``command`` runs any command line
given by the user. The identity (provider, options) is recorded in RunCreated,
so a resumed Run starts the same Agent again.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import Any

import msgspec

from evopolicygym.records.events import AgentIdentity

__all__ = ["PROVIDERS", "AgentError", "AgentLaunch", "agent_identity", "launch_for"]

PROVIDERS = ("reference", "command")

# What an Agent inherits from the Host's environment; everything else (credentials, the
# store's location) stays with the Host unless the user passes it on with --agent-env.
_INHERITED = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "TZ",
)


class AgentError(ValueError):
    """An Agent that cannot be configured or started; the message says what to fix."""


class AgentLaunch(msgspec.Struct, frozen=True, kw_only=True):
    argv: list[str]
    env: dict[str, str]


def agent_identity(
    provider: str,
    *,
    command: str | None = None,
    seed: int = 0,
    env: tuple[str, ...] = (),
    name: str | None = None,
) -> AgentIdentity:
    """The identity recorded for an Agent, checked so that a bad one fails before the Run."""
    options: dict[str, Any] = {}
    if provider == "reference":
        if command:
            raise AgentError("--agent-command is for --agent command, not reference")
        options["seed"] = seed
    elif provider == "command":
        if not command:
            raise AgentError("--agent command needs --agent-command 'PROGRAM ARGS...'")
        argv = shlex.split(command)
        if not argv:
            raise AgentError("--agent-command is empty")
        options["command"] = argv
    else:
        raise AgentError(f"unknown agent {provider!r}; choose from {', '.join(PROVIDERS)}")
    if env:
        options["env"] = sorted(set(env))
    identity = AgentIdentity(name=name or provider, provider=provider, options=options)
    launch_for(identity)  # resolve the executable now: a missing one is an error before the Run
    return identity


def launch_for(identity: AgentIdentity) -> AgentLaunch:
    """The command line and environment (before the session variables) for ``identity``."""
    env = {key: os.environ[key] for key in _INHERITED if key in os.environ}
    for key in identity.options.get("env", []):
        if key in os.environ:
            env[key] = os.environ[key]
    # The `evopolicy` of this installation comes first on PATH, so agents find the session CLI.
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if identity.provider == "reference":
        argv = [sys.executable, "-m", "evopolicygym.agents.reference"]
        argv += ["--seed", str(int(identity.options.get("seed", 0)))]
    elif identity.provider == "command":
        argv = [str(part) for part in identity.options.get("command", [])]
        if not argv:
            raise AgentError("the command agent has no command")
        executable = shutil.which(argv[0], path=env["PATH"])
        if executable is None:
            raise AgentError(f"agent command not found: {argv[0]}")
    else:
        raise AgentError(f"unknown agent provider {identity.provider!r}")
    return AgentLaunch(argv=argv, env=env)
