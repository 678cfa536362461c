"""Agent providers: how an AgentIdentity becomes a command line and an environment.

``reference`` is the built-in offline agent and ``chat`` the built-in harness for
any OpenAI-compatible Chat Completions endpoint; ``codex``, ``claude-code``,
``kimi`` and ``qoder`` run those coding-agent CLIs non-interactively with
their JSON event streams on stdout; ``command`` runs any command line given by
the user. The identity (provider, model, options) is recorded in RunCreated,
so a resumed Run starts the same Agent again. Each provider inherits only the
environment variables it names (its credentials among them); everything else
stays with the Host unless passed on with ``--agent-env``.

The CLIs run with their own approval prompts and sandboxes off: they run
non-interactively, and the Host contains them (mount and PID namespaces that
hide the store); their sandboxes would also block the session socket.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from typing import Any

import msgspec

from evopolicygym.transcript import AgentIdentity

__all__ = [
    "PROVIDERS",
    "AgentError",
    "AgentLaunch",
    "Provider",
    "agent_identity",
    "kimi_flavour",
    "launch_for",
]

# The provider of Runs a trainer's model drove through evopolicygym.training: recorded, never
# started by the Host (its Agent lived in the trainer's process).
TRAINER_PROVIDER = "trainer"

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
    stream: str = "native"  # how its stdout is parsed into the transcript (agents.streams)


class Provider(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    executable: str | None  # resolved on PATH before a Run starts; None: this Python
    env: tuple[str, ...] = ()  # what it inherits beyond the basics (credentials, config)
    stream: str = "native"
    model: bool = False  # takes --model
    effort: bool = False  # takes --effort


# Kimi Code's model from the environment (its documented KIMI_MODEL_* variables).
_KIMI_MODEL_VARIABLES = (
    "NAME",
    "API_KEY",
    "BASE_URL",
    "PROVIDER_TYPE",
    "MAX_CONTEXT_SIZE",
    "MAX_OUTPUT_SIZE",
    "CAPABILITIES",
    "DISPLAY_NAME",
    "REASONING_KEY",
    "ADAPTIVE_THINKING",
    "THINKING_EFFORT",
    "TEMPERATURE",
    "TOP_P",
)

_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            name="reference",
            description="offline evolving agent, no LLM (for tests and quickstart)",
            executable=None,
        ),
        Provider(
            name="chat",
            description=(
                "built-in tool-calling loop against an OpenAI-compatible endpoint (--base-url)"
            ),
            executable=None,
            model=True,
        ),
        Provider(
            name="codex",
            description="OpenAI Codex CLI: codex exec --json",
            executable="codex",
            env=("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"),
            stream="codex",
            model=True,
            effort=True,
        ),
        Provider(
            name="claude-code",
            description="Claude Code: claude -p --output-format stream-json",
            executable="claude",
            env=(
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
                "CLAUDE_CODE_MAX_RETRIES",
            ),
            stream="claude-code",
            model=True,
        ),
        Provider(
            name="kimi",
            description=(
                "Kimi Code (kimi -p --output-format stream-json) or kimi-cli 1.x (kimi --print ...)"
            ),
            executable="kimi",
            env=(
                "MOONSHOT_API_KEY",
                "KIMI_API_KEY",
                "KIMI_BASE_URL",
                "KIMI_SHARE_DIR",  # kimi-cli's home
                "KIMI_CODE_HOME",
                *(f"KIMI_MODEL_{name}" for name in _KIMI_MODEL_VARIABLES),
            ),
            stream="kimi",
            model=True,
        ),
        Provider(
            name="qoder",
            description="Qoder CLI: qodercli -p --output-format stream-json",
            executable="qodercli",
            env=("QODER_PERSONAL_ACCESS_TOKEN",),
            stream="qoder",
            model=True,
        ),
        Provider(
            name="command",
            description=(
                "any command line (--agent-command); it may print transcript messages as JSON lines"
            ),
            executable=None,
        ),
    )
}


def agent_identity(
    provider: str,
    *,
    command: str | None = None,
    seed: int = 0,
    env: tuple[str, ...] = (),
    name: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
) -> AgentIdentity:
    """The identity recorded for an Agent, checked so that a bad one fails before the Run."""
    spec = PROVIDERS.get(provider)
    if spec is None:
        raise AgentError(f"unknown agent {provider!r}; choose from {', '.join(PROVIDERS)}")
    if command and provider != "command":
        raise AgentError(f"--agent-command is for --agent command, not {provider}")
    if model is not None and not spec.model:
        raise AgentError(f"--model is not an option of the {provider} agent")
    if effort is not None and not spec.effort:
        raise AgentError(f"--effort is not an option of the {provider} agent")
    if effort is not None and effort not in _EFFORTS:
        raise AgentError(f"--effort must be one of {', '.join(_EFFORTS)}")
    chat_only = (base_url, api_key_env, max_turns, max_tokens)
    if any(value is not None for value in chat_only) and provider != "chat":
        raise AgentError(
            "--base-url, --api-key-env, --max-turns and --max-tokens are for --agent chat, "
            f"not {provider}"
        )
    options: dict[str, Any] = {}
    if provider == "reference":
        options["seed"] = seed
    elif provider == "command":
        if not command:
            raise AgentError("--agent command needs --agent-command 'PROGRAM ARGS...'")
        argv = shlex.split(command)
        if not argv:
            raise AgentError("--agent-command is empty")
        options["command"] = argv
    elif provider == "chat":
        if not base_url or not model:
            raise AgentError("--agent chat needs --base-url URL and --model NAME")
        if not base_url.startswith(("http://", "https://")):
            raise AgentError(f"--base-url must be an http(s) URL, not {base_url!r}")
        options["base_url"] = base_url.rstrip("/")
        options["api_key_env"] = api_key_env or "OPENAI_API_KEY"
        for key, value in (("max_turns", max_turns), ("max_tokens", max_tokens)):
            if value is not None:
                if value < 1:
                    raise AgentError(f"--{key.replace('_', '-')} must be at least 1")
                options[key] = value
    if effort is not None:
        options["effort"] = effort
    _refuse_secrets(options)
    if env:
        options["env"] = sorted(set(env))
    identity = AgentIdentity(name=name or provider, provider=provider, model=model, options=options)
    launch_for(identity)  # resolve the executable now: a missing one is an error before the Run
    return identity


def _refuse_secrets(options: dict[str, Any]) -> None:
    """The identity is recorded as given (a resumed Run starts the same command), so a
    secret in it would be stored: refuse one, and say how to pass it instead."""
    from evopolicygym.redaction import Redactor

    redactor = Redactor.from_environment(())
    for key in ("command", "base_url"):
        if key in options and redactor.value(options[key]) != options[key]:
            raise AgentError(
                f"the agent's {key.replace('_', '-')} holds what looks like a secret; pass it "
                "in an environment variable instead (--agent-env NAME, or --api-key-env)"
            )


_FLAVOURS: dict[tuple[str, int], str] = {}


def kimi_flavour(env: dict[str, str]) -> str:
    """Which CLI ``kimi`` on ``env``'s PATH is: ``kimi-code`` (the Node CLI, 2.x) or
    ``kimi-cli`` (the Python CLI, 1.x), told by its ``--version``; their flags differ."""
    executable = shutil.which("kimi", path=env.get("PATH"))
    if executable is None:
        return "kimi-code"
    with contextlib.suppress(OSError):
        key = (os.path.realpath(executable), os.stat(executable).st_mtime_ns)
        if key not in _FLAVOURS:
            try:
                done = subprocess.run(
                    [executable, "--version"], capture_output=True, text=True, timeout=30, env=env
                )
                said = done.stdout + done.stderr
            except (OSError, subprocess.SubprocessError):
                said = ""
            # kimi-cli says "kimi, version 1.51.0"; Kimi Code prints the bare version.
            _FLAVOURS[key] = "kimi-cli" if "kimi, version" in said else "kimi-code"
        return _FLAVOURS[key]
    return "kimi-code"


def launch_for(identity: AgentIdentity, task: str = "") -> AgentLaunch:
    """The command line and environment (before the session variables) for ``identity``;
    ``task`` (the Host's task text) is the prompt of the CLI providers."""
    spec = PROVIDERS.get(identity.provider)
    if identity.provider == TRAINER_PROVIDER:
        raise AgentError(
            "the Agent was a trainer's model (evopolicygym.training), which cannot be started "
            "again; resuming concludes the Run as it stands"
        )
    if spec is None:
        raise AgentError(f"unknown agent provider {identity.provider!r}")
    options = identity.options
    inherited = [*_INHERITED, *spec.env, *options.get("env", [])]
    if identity.provider == "chat":
        inherited.append(str(options.get("api_key_env", "OPENAI_API_KEY")))
    env = {key: os.environ[key] for key in inherited if key in os.environ}
    # The `evopolicy` of this installation comes first on PATH, so agents find the session CLI.
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    prompt = task or "Read TASK.md in the current directory and do what it asks."
    model = identity.model
    match identity.provider:
        case "reference":
            argv = [sys.executable, "-m", "evopolicygym.agents.reference"]
            argv += ["--seed", str(int(options.get("seed", 0)))]
        case "chat":
            argv = [sys.executable, "-m", "evopolicygym.agents.chat"]
            argv += ["--base-url", str(options["base_url"]), "--model", str(model)]
            argv += ["--api-key-env", str(options.get("api_key_env", "OPENAI_API_KEY"))]
            argv.append("--no-system-message")  # the Host records the task as the system message
            for key in ("max_turns", "max_tokens"):
                if key in options:
                    argv += [f"--{key.replace('_', '-')}", str(int(options[key]))]
        case "command":
            argv = [str(part) for part in options.get("command", [])]
            if not argv:
                raise AgentError("the command agent has no command")
        case "codex":
            argv = ["codex", "exec", "--json", "--skip-git-repo-check"]
            argv += ["--dangerously-bypass-approvals-and-sandbox"]
            if model:
                argv += ["--model", model]
            if options.get("effort"):
                argv += ["-c", f'model_reasoning_effort="{options["effort"]}"']
            argv.append(prompt)
        case "claude-code":
            argv = ["claude", "-p", prompt, "--output-format", "stream-json", "--verbose"]
            argv += ["--permission-mode", "bypassPermissions"]
            if os.geteuid() == 0:
                # Claude Code refuses to skip permissions as root outside a sandbox; the
                # Host's jail is the sandbox.
                env["IS_SANDBOX"] = "1"
            if model:
                argv += ["--model", model]
        case "kimi":
            if kimi_flavour(env) == "kimi-cli":
                argv = ["kimi", "--print", "-p", prompt, "--output-format", "stream-json"]
                if model:
                    argv += ["--model", model]
            else:
                # Kimi Code: prompt mode runs without asking. Its --model takes an alias of its
                # config; a model given by KIMI_MODEL_NAME is its default and needs none.
                argv = ["kimi", "-p", prompt, "--output-format", "stream-json"]
                if model and "KIMI_MODEL_NAME" not in env:
                    argv += ["--model", model]
        case "qoder":
            argv = ["qodercli", "-p", prompt, "--output-format", "stream-json"]
            # Headless, anything needing confirmation is denied (the session commands too).
            argv += ["--permission-mode", "bypass_permissions"]
            if model:
                argv += ["--model", model]
        case _:
            raise AgentError(f"unknown agent provider {identity.provider!r}")
    if identity.provider not in ("reference", "chat"):
        executable = shutil.which(argv[0], path=env["PATH"])
        if executable is None:
            hint = (
                ""
                if identity.provider == "command"
                else f" (the {identity.provider} agent runs it)"
            )
            raise AgentError(
                f"agent command not found: {argv[0]}{hint}; install it or put it on PATH"
            )
    return AgentLaunch(argv=argv, env=env, stream=spec.stream)
