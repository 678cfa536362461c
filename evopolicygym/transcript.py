"""The Agent's conversation as the record keeps it, and the words the Host and its built-in
agents put into it.

- ``Message``, ``ToolCall``, ``Usage``: one normalized transcript message (DESIGN §4.4),
  shared by the agents that produce it, the log that keeps it and the exporters that
  turn it into chat rows. ``AgentIdentity``: who produced it.
- The built-in agents' tools as OpenAI-style schemas (``CHAT_TOOLS``,
  ``REFERENCE_TOOLS``, ``BUILTIN_TOOLS`` by provider): what the chat agent sends with
  every request and what the exporters put beside a conversation.
- ``KICKOFF``: the opening user turn; ``task_files``: the task (TASK.md and task.json)
  the Host writes into the workspace and opens every transcript with.

A leaf: msgspec and the standard library only, so agents, records and exporters all
import it without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

__all__ = [
    "ANALYSIS_TIMEOUT_S",
    "BUDGET_FIELDS",
    "BUILTIN_TOOLS",
    "CHAT_TOOLS",
    "KICKOFF",
    "READ_CHARS",
    "REFERENCE_TOOLS",
    "TOOLS_NOTE",
    "TOOL_SESSION_PROVIDERS",
    "TRAINER_TOOLS",
    "AgentFault",
    "AgentIdentity",
    "Message",
    "TaskFacts",
    "ToolCall",
    "Usage",
    "fault_line",
    "offered_tools",
    "task_files",
]


# --------------------------------------------------------------------------- messages


class AgentIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """Who the Agent was: provider (``reference``, ``codex``, ``chat``…), model and options."""

    name: str
    provider: str
    model: str | None = None
    options: dict[str, Any] = {}


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any] = {}


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens of one model response (or, where a CLI tells no more, of several)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # of input_tokens, read from the provider's cache
    cache_write_tokens: int = 0  # of input_tokens, written to it
    reasoning_tokens: int = 0  # of output_tokens, spent reasoning


class AgentFault(msgspec.Struct, frozen=True, kw_only=True):
    """What an ``error`` record says went wrong: ``kind`` as the CLI names it (an API error
    type, ``authentication``, ``synthetic`` for a message the CLI made up itself, a failed
    turn) and the HTTP ``status`` where one was given."""

    kind: str
    status: int | None = None


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One normalized transcript message; maps one-to-one onto the chat format trainers use.

    ``role == "error"`` is not a message of the conversation but a record of a failure the
    Agent's CLI reported (``content`` its text, ``error`` what it was): shown by ``record``
    and ``replay``, never exported as a turn."""

    role: Literal["system", "user", "assistant", "tool", "error"]
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = []
    tool_call_id: str | None = None
    name: str | None = None
    usage: Usage | None = None
    at: int = 0
    error: AgentFault | None = None
    model: str | None = None  # the model that wrote an assistant message, where known


def fault_line(message: Message) -> str:
    """An error record as one line: ``kind status: text`` (at most 300 characters)."""
    error = message.error
    kind = error.kind if error is not None else "error"
    status = f" {error.status}" if error is not None and error.status is not None else ""
    text = f"{kind}{status}: {' '.join(message.content.split())}"
    return text if len(text) <= 300 else text[:297] + "..."


# --------------------------------------------------------------------------- tool schemas

ANALYSIS_TIMEOUT_S = 60.0  # the chat agent's run_analysis, per call
READ_CHARS = 20_000  # the chat agent's read_file returns at most this many characters per call

# The opening user turn of the chat agent, and of an exported conversation that has none
# (the reference agent starts acting at once): chat templates expect a user turn after the
# system one.
KICKOFF = "Read the task above, then improve the policy in `program/` within the budget."
TOOLS_NOTE = (
    "Work only through the tools. `list_files`, `read_file`, `write_file` and `edit_file` take "
    "paths relative to the workspace; writes are allowed only under `program/` and `analysis/`. "
    "`run_analysis` runs Python in `analysis/` (never the Environment: the session is your only "
    "access to it). `submit` evaluates a program directory on Episodes of the pool and returns "
    "its feedback (also in `feedback/`); `finish` ends the Run with Submission ids, best first. "
    "You have at most {turns} model turns."
)


def _function(
    name: str, description: str, properties: dict[str, Any], required: Sequence[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(required)},
        },
    }


_PATH = {
    "type": "string",
    "description": "a path relative to the workspace, like program/policy.py",
}

# The chat agent's tools, as an OpenAI-style tools list (what every request sends).
CHAT_TOOLS: list[dict[str, Any]] = [
    _function(
        "list_files",
        "List the files under a directory of the workspace (recursively, with sizes).",
        {
            "path": {
                "type": "string",
                "description": "a directory relative to the workspace; default '.'",
            }
        },
        [],
    ),
    _function(
        "read_file",
        f"Read a text file of the workspace; at most {READ_CHARS} characters from `offset`.",
        {
            "path": _PATH,
            "offset": {"type": "integer", "description": "the first character to read; default 0"},
        },
        ["path"],
    ),
    _function(
        "write_file",
        "Create or replace a text file under program/ or analysis/ (other paths are read-only).",
        {"path": _PATH, "content": {"type": "string", "description": "the whole new content"}},
        ["path", "content"],
    ),
    _function(
        "edit_file",
        "Replace one exact, unique occurrence of `old` with `new` in a file under program/ or "
        "analysis/. `old` must appear exactly once: include enough surrounding lines.",
        {
            "path": _PATH,
            "old": {"type": "string", "description": "the exact text to replace"},
            "new": {"type": "string", "description": "the replacement text"},
        },
        ["path", "old", "new"],
    ),
    _function(
        "run_analysis",
        f"Run a Python script (given as source code) with analysis/ as the working directory, "
        f"for at most {ANALYSIS_TIMEOUT_S:g} s; returns its exit status, stdout and stderr "
        "(truncated). numpy is available. It has no session: running, importing or probing the "
        "Environment (or its simulator) outside the session is forbidden; use `submit` to "
        "evaluate a policy.",
        {"code": {"type": "string", "description": "Python source to run"}},
        ["code"],
    ),
    _function(
        "submit",
        "Submit a program directory (default program/) for evaluation on Episodes of the Run's "
        "pool, chosen by a selector of indices: `3`, `0:4` (half-open), `0:2,4:8`. Each Episode "
        "costs budget. Returns the feedback as JSON, or the rejection.",
        {
            "episodes": {"type": "string", "description": "the Episode selector, like 0:4"},
            "directory": {
                "type": "string",
                "description": "the program directory relative to the workspace; default program",
            },
        },
        ["episodes"],
    ),
    _function(
        "finish",
        "Finish the Run, naming Submission ids as the final candidates, best first. "
        "This ends your work once accepted.",
        {
            "candidates": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "Submission ids, best first",
            }
        },
        ["candidates"],
    ),
]

_WORKSPACE_PATH = {"type": "string", "description": "path relative to the workspace"}

# The tools the offline reference agent records its work as.
REFERENCE_TOOLS: list[dict[str, Any]] = [
    _function(
        "read_file", "Read a text file of the workspace.", {"path": _WORKSPACE_PATH}, ["path"]
    ),
    _function(
        "write_file",
        "Write a text file of the workspace, replacing it.",
        {
            "path": _WORKSPACE_PATH,
            "content": {"type": "string", "description": "the whole new content"},
        },
        ["path", "content"],
    ),
    _function(
        "bash",
        "Run a shell command in the workspace (the session commands among them).",
        {"command": {"type": "string", "description": "the command line"}},
        ["command"],
    ),
]


def _trainer_tool(
    name: str, description: str, properties: dict[str, Any], required: Sequence[str]
) -> dict[str, Any]:
    """A tool as ``transformers.utils.get_json_schema`` renders a method (what TRL offers)."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = list(required)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": parameters,
            "return": {"type": "string"},
        },
    }


# The tools of the training environment (``evopolicygym.training.PolicyEvolutionEnv``), as
# TRL renders its methods' type hints and docstrings (a test compares them): what a model
# trained through it was offered.
TRAINER_TOOLS: list[dict[str, Any]] = [
    _trainer_tool(
        "finish",
        "Finish the Run, naming Submission ids as the final candidates, best first.",
        {
            "candidates": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "Submission ids, best first (ids from submit).",
            }
        },
        ["candidates"],
    ),
    _trainer_tool("list_files", "List the workspace's files with their sizes.", {}, []),
    _trainer_tool(
        "read_file",
        "Read a text file of the workspace.",
        {
            "path": {
                "type": "string",
                "description": "A path relative to the workspace, like TASK.md or "
                "program/policy.py.",
            }
        },
        ["path"],
    ),
    _trainer_tool(
        "submit",
        "Evaluate program/ on Episodes of the Run's pool; each Episode costs budget.",
        {
            "episodes": {
                "type": "string",
                "description": "Pool indices: `3`, `0:4` (half-open) or `0:2,4:8`.",
            }
        },
        ["episodes"],
    ),
    _trainer_tool(
        "write_file",
        "Create or replace a text file under program/ or analysis/.",
        {
            "path": {
                "type": "string",
                "description": "A path under program/ or analysis/, like program/policy.py.",
            },
            "content": {"type": "string", "description": "The whole new content."},
        },
        ["path", "content"],
    ),
]

# The exact tool schemas of the built-in agents, by provider and tool name.
BUILTIN_TOOLS: dict[str, dict[str, dict[str, Any]]] = {
    "reference": {tool["function"]["name"]: tool for tool in REFERENCE_TOOLS},
    "chat": {tool["function"]["name"]: tool for tool in CHAT_TOOLS},
    "trainer": {tool["function"]["name"]: tool for tool in TRAINER_TOOLS},
}

# Agents whose session is a set of tools (a trainer's model), not shell commands: their
# TASK.md says so (``task_files(..., session="tools")``).
TOOL_SESSION_PROVIDERS = frozenset({"trainer"})


def offered_tools(agent: AgentIdentity) -> list[dict[str, Any]] | None:
    """The tools ``agent`` is offered, exactly, where the Host knows them (the built-in
    agents); None for a CLI, whose tools only its calls tell."""
    known = BUILTIN_TOOLS.get(agent.provider)
    return None if known is None else list(known.values())


# --------------------------------------------------------------------------- the task


class _Validation(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool
    max_candidates: int


# The Run's public budget and limits, RunConfig fields by these names: what a task states and
# an exported task's ``budget`` holds (with the Validation's max_candidates), never its seed.
BUDGET_FIELDS = (
    "episode_budget",
    "episode_pool_size",
    "max_submissions",
    "max_episodes_per_submission",
    "finish_budget_policy",
    "episode_timeout",
    "agent_timeout",
)


class TaskFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The public limits of a Run the task states, read from its resolved config (as
    ``RunCreated.config`` keeps it; the Host-private seed in it is never read)."""

    episode_budget: int
    episode_pool_size: int
    max_submissions: int
    max_episodes_per_submission: int
    finish_budget_policy: str
    validation: _Validation
    episode_timeout: float
    agent_timeout: float
    host_nomination: bool = False
    feedback: dict[str, Any] | None = None  # the Run's Feedback condition (RunConfig.feedback)

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> TaskFacts:
        return msgspec.convert(config, cls)


_DEFAULT_FEEDBACK = {"traces": "benchmark", "trace_steps": None, "episodes": True, "content": True}


def _feedback_md(shown: Mapping[str, Any] | None) -> str:
    """The workspace's feedback/ line: as it always read under the default condition."""
    if not shown or {**_DEFAULT_FEEDBACK, **shown} == _DEFAULT_FEEDBACK:
        return (
            "- `feedback/` — read-only. After each submission, "
            "`feedback/submission-NNNN/feedback.json`\n"
            "  (Episodes, budget used and left, score, public content, per-Episode summaries, "
            "artifacts)\n"
            "  and `feedback/latest.json`."
        )
    parts = ["Episodes, budget used and left, score, failure count"]
    if shown.get("content", True):
        parts.append("public content")
    if shown.get("episodes", True):
        parts.append("per-Episode summaries")
    traces = shown.get("traces", "benchmark")
    if traces == "all" or (isinstance(traces, int) and traces > 0):
        which = "every Episode" if traces == "all" else f"the first {traces} Episode(s)"
        steps = shown.get("trace_steps")
        cut = f", first {steps} steps" if steps else ""
        parts.append(
            f"artifacts: step traces of {which}{cut} as `artifacts/episode-<index>.trace.jsonl`"
        )
    elif traces == "benchmark":
        parts.append("artifacts")
    return (
        "- `feedback/` — read-only. After each submission, "
        "`feedback/submission-NNNN/feedback.json`\n"
        f"  ({', '.join(parts)}) and `feedback/latest.json`."
    )


_CLI_SESSION = """## Session (your only access to the Environment)
Run the session commands from the workspace root as `./evopolicy session ...` (an
`evopolicy` on PATH, where there is one, is the same command).
- `./evopolicy session submit [DIR] --episodes SELECTOR` evaluates a program (default
  `program/`) on Episodes of the pool, addressed by index `0..{last}`:
  `3`, `0:4` (half-open), `0:2,4:8` (strictly increasing, non-overlapping). Reusing indices
  compares programs on identical Episodes and costs budget again. `--parent ID` says which
  Submission the program was edited from (0: the initial program).
- `./evopolicy session finish ID [ID...]` ends your work, naming up to
  {candidates} Submission ids as candidates, best first. {unfinished}
- Success prints JSON on stdout (exit 0); a rejection prints `{{"error": {{"code", "message"}}}}`
  on stderr (exit 1).
"""

_TOOL_SESSION = """## Session (your only access to the Environment)
Work by calling the tools; paths are relative to the workspace.
- `list_files()` and `read_file(path)` read the workspace; `write_file(path, content)`
  writes under `program/` and `analysis/`.
- `submit(episodes)` evaluates `program/` on Episodes of the pool, addressed by index
  `0..{last}`: `3`, `0:4` (half-open), `0:2,4:8` (strictly increasing, non-overlapping).
  Reusing indices compares programs on identical Episodes and costs budget again. It returns
  the Feedback with the Submission's id.
- `finish(candidates)` ends your work, naming up to {candidates} Submission ids as candidates,
  best first. {unfinished}
- A rejected call returns `error: <code>: <message>` and costs nothing.
"""


def task_files(
    spec: Mapping[str, Any],
    config: Mapping[str, Any],
    skills: Sequence[tuple[str, str]] = (),
    *,
    session: Literal["cli", "tools"] = "cli",
) -> tuple[str, bytes]:
    """(TASK.md, task.json) for a Run on the Benchmark with public spec ``spec``, under the
    resolved Run config ``config``, with ``skills`` as (name, description) pairs. ``session``:
    whether the Agent reaches the Session by shell commands or as tools (a trainer's model)."""
    facts = TaskFacts.of(config)
    pool = facts.episode_pool_size
    candidates = facts.validation.max_candidates
    public: dict[str, Any] = {
        "benchmark": dict(spec),
        "episode_budget": facts.episode_budget,
        "episode_pool_size": pool,
        "max_submissions": facts.max_submissions,
        "max_episodes_per_submission": facts.max_episodes_per_submission,
        "finish_budget_policy": facts.finish_budget_policy,
        "max_candidates": candidates,
        "episode_timeout_s": facts.episode_timeout,
        "agent_timeout_s": facts.agent_timeout,
    }
    if skills:
        public["skills"] = [{"name": name, "description": text} for name, text in skills]
    task_json = (json.dumps(public, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    direction = "higher" if spec.get("score_direction") == "maximize" else "lower"
    finish_rule = (
        "You may finish at any time."
        if facts.finish_budget_policy == "allow_early"
        else "You must spend the whole Episode budget before `finish` is accepted."
    )
    selection = (
        f"The Host evaluates every candidate you name on the same hidden validation Episodes "
        f"and keeps the best ({direction} score, then fewer policy failures, then your order); "
        "the kept program is then measured once on held-out Episodes. You never see either. "
        "The initial program is evaluated there too: your Run improved if the kept program "
        "beats it."
        if facts.validation.enabled
        else "Your first candidate becomes the final program."
    )
    unfinished = (
        "If you never finish, the Host validates your best published Submissions instead."
        if facts.host_nomination
        else "If you never finish, the Run has no final program."
    )
    feedback_md = _feedback_md(facts.feedback)
    session_md = (_TOOL_SESSION if session == "tools" else _CLI_SESSION).format(
        last=pool - 1, candidates=candidates, unfinished=unfinished
    )
    skills_md = ""
    if skills:
        listed = "\n".join(
            f"- `skills/{name}/SKILL.md`" + (f" — {text}" if text else "") for name, text in skills
        )
        skills_md = f"\n## Skills (read these first)\n{listed}\n"
    task_md = f"""# Task: evolve a policy for `{spec.get("id")}`

{spec.get("description", "")}

Improve the policy program in `program/` so that it scores as {direction} as possible
(metric: {spec.get("primary_metric", "score")}).

## Workspace
- `program/` — the policy you edit. `policy.py` defines `make_policy(context)` returning an
  object with `act(observation) -> action`. One fresh process per Episode; standard library
  and numpy are available. `context` has observation_space, action_space, metadata,
  environment_parameters and policy_seed.
{feedback_md}
- `analysis/` — yours, for notes and scripts.
- `task.json` — these facts in machine-readable form, with the Benchmark's public spec.

{session_md}
## Limits
- Episode budget: {facts.episode_budget}; at most {facts.max_submissions} submissions of at
  most {facts.max_episodes_per_submission} Episodes each. {finish_rule}
- Each Episode gives the policy {facts.episode_timeout:g} s; you have
  {facts.agent_timeout:g} s in all.
- {selection}
- Running, importing or probing the Environment outside the session is forbidden.
{skills_md}"""
    return task_md, task_json
