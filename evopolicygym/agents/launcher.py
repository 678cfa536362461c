"""The built-in providers behind the Host's launcher interface (``evopolicygym.run.launcher``).

``ProviderLauncher`` is what a ``RunHost`` is given to start Agents: the provider's
command line and environment (``providers``), a redactor for its credentials
(``message_redaction``), and the process (``process``) run inside the jail (``jail``) with its
stdout parsed by the provider's stream parser (``streams``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence

import msgspec

from evopolicygym.agents import jail as jail_module
from evopolicygym.agents.cli_records import (
    SessionRecord,
    read_session,
    relative_to_workspace,
    session_id_in,
)
from evopolicygym.agents.message_redaction import Redactor
from evopolicygym.agents.process import AgentProcess
from evopolicygym.agents.providers import PROVIDERS, AgentError, AgentLaunch, launch_for
from evopolicygym.agents.streams import PARSERS
from evopolicygym.namespaces import containment_disabled
from evopolicygym.redaction import is_credential_name
from evopolicygym.transcript import AgentIdentity, Message

__all__ = ["ProviderLauncher"]


class ProviderLauncher:
    """Starts the Agents of ``agents.providers``, each contained by ``agents.jail``.

    ``allow_uncontained``: where the jail cannot be set up, run the Agent as the Host's
    user anyway (the Run's ``--allow-uncontained-agent``) instead of refusing to start it.
    """

    def __init__(self, *, allow_uncontained: bool = False) -> None:
        self._allow_uncontained = allow_uncontained
        self._containment: str | None = None

    def containment(self) -> str:
        """How this machine contains Agents: "namespaces", or "none" where the jail cannot be
        set up and that was allowed (or containment is turned off). Raises AgentError, saying
        why, where it cannot be set up and that was not allowed."""
        if self._containment is None:
            self._containment = self._probe()
        return self._containment

    def _probe(self) -> str:
        if containment_disabled():
            return "none"
        try:
            probe = subprocess.run(
                [*_jail_command(), "--probe", "--"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"the jail's probe failed: {exc}"
        else:
            if probe.returncode == 0 and jail_module.PROBE_OK in probe.stderr:
                return "namespaces"
            lines = probe.stderr.strip().splitlines()
            why = (
                lines[-1].removeprefix("jail: ").removesuffix("; not starting it")
                if lines
                else f"exit {probe.returncode}"
            )
        if self._allow_uncontained:
            return "none"
        raise AgentError(
            f"{why}: the Agent cannot be contained here (it needs user, mount and PID namespaces); "
            "pass --allow-uncontained-agent to run it as the Host's user anyway"
        )

    def launch(self, agent: AgentIdentity, task: str) -> AgentLaunch:
        return launch_for(agent, task)  # the CLI providers take the task as their prompt

    def redactor(self, agent: AgentIdentity) -> Redactor:
        """Secrets the Agent's transcript and output may hold: the values of its provider's
        credential variables (and those it was given), and every known secret pattern."""
        provider = PROVIDERS.get(agent.provider)
        names = [name for name in (provider.env if provider else ()) if is_credential_name(name)]
        names += [
            str(name) for name in agent.options.get("env", [])
        ]  # given on purpose: all kept out
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
        # Run where the hidden directories (the store) are empty, the Host's code read-only
        # and its /proc out of sight.
        jail = _jail_command()
        for path in hide:
            jail += ["--hide", path]
        for path in _host_code():
            jail += ["--read-only", path]
        for path in [cwd, *_own_dirs(env)]:
            jail += ["--writable", path]
        if (
            containment_disabled() or self._containment == "none"
        ):  # the same override as for policies
            jail.append("--uncontained")
        elif self._allow_uncontained:
            jail.append("--allow-uncontained")
        return AgentProcess(
            [*jail, "--", *argv], cwd=cwd, env=env, on_message=on_message, parser=PARSERS[stream]()
        )

    def session_record(
        self,
        agent: AgentIdentity,
        stdout: bytes,
        stderr: bytes,
        env: dict[str, str],
        workspace: str,
    ) -> SessionRecord | None:
        record = read_session(agent.provider, session_id_in(agent.provider, stdout, stderr), env)
        if record is None:
            return None
        return msgspec.structs.replace(
            record, messages=relative_to_workspace(record.messages, workspace)
        )


def _jail_command() -> list[str]:
    """The jail as a script in a fresh interpreter without site-packages: it imports the
    standard library only, so no thread exists when it enters its user namespace."""
    return [sys.executable, "-I", "-S", "-B", os.path.abspath(jail_module.__file__)]


def _host_code() -> list[str]:
    """Where the Host's interpreter and code live: read-only to the Agent, so nothing it
    writes changes what the Host runs next."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(jail_module.__file__)))
    places = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(package_root)]
    return list(dict.fromkeys(os.path.realpath(p) for p in places))


def _own_dirs(env: dict[str, str]) -> list[str]:
    """The Agent's configuration and data directories named by its environment (CODEX_HOME,
    XDG_CONFIG_HOME, KIMI_SHARE_DIR...): writable to it, as its home is."""
    return [
        value
        for name, value in env.items()
        if (name.endswith(("_HOME", "_DIR")) or name.startswith("XDG_"))
        and os.path.isabs(value)
        and os.path.isdir(value)
    ]
