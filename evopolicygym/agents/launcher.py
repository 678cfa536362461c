"""The built-in providers behind the Host's launcher interface (``evopolicygym.run.launcher``).

``ProviderLauncher`` is what a ``RunHost`` is given to start Agents: the provider's
command line and environment (``providers``), a redactor for its credentials
(``redact``), and the process (``process``) run inside the jail (``jail``) with its
stdout parsed by the provider's stream parser (``streams``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import msgspec

from evopolicygym.agents.process import AgentProcess
from evopolicygym.agents.providers import PROVIDERS, AgentLaunch, launch_for
from evopolicygym.agents.redact import Redactor
from evopolicygym.agents.sessions import (
    SessionRecord,
    read_session,
    relative_to_workspace,
    session_id_in,
)
from evopolicygym.agents.streams import PARSERS
from evopolicygym.namespaces import containment_disabled
from evopolicygym.redaction import is_credential_name
from evopolicygym.transcript import AgentIdentity, Message

__all__ = ["ProviderLauncher"]


class ProviderLauncher:
    """Starts the Agents of ``agents.providers``, each contained by ``agents.jail``."""

    def launch(self, agent: AgentIdentity, task: str) -> AgentLaunch:
        return launch_for(agent, task)  # the CLI providers take the task as their prompt

    def redactor(self, agent: AgentIdentity) -> Redactor:
        """Secrets the Agent's transcript and output may hold: the values of its provider's
        credential variables (and those it was given), and every known secret pattern."""
        provider = PROVIDERS.get(agent.provider)
        names = [name for name in (provider.env if provider else ()) if is_credential_name(name)]
        names += [str(name) for name in agent.options.get("env", [])]  # given on purpose: all kept out
        if agent.options.get("api_key_env"):
            names.append(str(agent.options["api_key_env"]))
        return Redactor.from_environment(names)

    def start(
        self,
        argv: list[str],
        *,
        stream: str,
        cwd: str,
        env: dict[str, str],
        hide: Sequence[str],
        on_message: Callable[[Message], None],
    ) -> AgentProcess:
        # Run where the hidden directories (the store) are empty and the Host's /proc is out of sight.
        jail = [sys.executable, "-m", "evopolicygym.agents.jail"]
        for path in hide:
            jail += ["--hide", path]
        if containment_disabled():  # the same override as for policies
            jail.append("--uncontained")
        return AgentProcess(
            [*jail, "--", *argv], cwd=cwd, env=env, on_message=on_message, parser=PARSERS[stream]()
        )

    def session_record(
        self, agent: AgentIdentity, stdout: bytes, stderr: bytes, env: dict[str, str], workspace: str
    ) -> SessionRecord | None:
        record = read_session(agent.provider, session_id_in(agent.provider, stdout, stderr), env)
        if record is None:
            return None
        return msgspec.structs.replace(record, messages=relative_to_workspace(record.messages, workspace))
