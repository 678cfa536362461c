"""The training environment over OpenEnv: the app ``evopolicy serve-env`` serves.

openenv-core's ``HTTPEnvServer`` gives every WebSocket session (``/ws``) an environment of
its own; here that is a ``ServedEnvironment`` holding one ``PolicyEvolutionEnv``, so each
``reset`` starts one real Run and the session's tool calls are that Run's Agent. Actions are
openenv's tool-calling types (``ListToolsAction``, ``CallToolAction``), which its own
``MCPToolClient`` and ``GenericEnvClient`` speak; an unknown tool or arguments the tool does
not take come back as an observation with an ``error``, never as a failed request.

OpenEnv's HTTP ``/reset`` and ``/step`` make a fresh environment per request: here that would
start a Run and drop it at once, so sessions live on the WebSocket only, and HTTP serves
``/health``, ``/metadata`` and ``/schema``. With a token, every request (the WebSocket
upgrade and ``/health`` included) must carry it as ``Authorization: Bearer <token>`` or as
the password of HTTP Basic credentials (what a ``ws://user:token@host`` URL sends).

Needs the ``training`` extra (openenv-core): only ``evopolicy serve-env`` imports this.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import (
    Action,
    EnvironmentMetadata,
    Observation,
    ServerMode,
    State,
)
from pydantic import Field

from evopolicygym.serving import Gate, listen, serve
from evopolicygym.transcript import TRAINER_TOOLS

__all__ = [
    "SESSION_PATH",
    "TOOLS",
    "DatasetError",
    "EnvState",
    "Gate",
    "ServedEnvironment",
    "TaskObservation",
    "TaskRows",
    "ToolObservation",
    "create_app",
    "listen",
    "load_tasks",
    "serve",
]

log = logging.getLogger(__name__)

SESSION_PATH = "/ws"  # openenv's session endpoint: one environment, so one Run, per connection
CONFIGS = ("rl_tools", "rl")  # the dataset configs served, in order of preference
LOOKUP_KEYS = frozenset({"task_id", "index"})
ROW_KEYS = ("prompt", "benchmark_id")  # reset arguments holding these are a whole row

TOOLS = [
    Tool(
        name=tool["function"]["name"],
        description=tool["function"]["description"],
        input_schema=tool["function"]["parameters"],
    )
    for tool in TRAINER_TOOLS
]
_TOOL_NAMES = frozenset(tool.name for tool in TOOLS)


# ------------------------------------------------------------------------- wire types


class TaskObservation(Observation):
    """What ``reset`` answers: the task of the Run it started."""

    task_id: str | None = Field(default=None, description="The row's task id.")
    run_id: str | None = Field(default=None, description="The Run this session now drives.")
    prompt: list[dict[str, Any]] = Field(
        default_factory=list, description="The row's prompt messages (role, content)."
    )
    text: str = Field(
        default="",
        description="What the prompt lacks for this Run, to append to its last user message "
        "(empty when the prompt already holds the Run's task).",
    )


class ToolObservation(CallToolObservation):
    """A tool's answer (``result``, a string) or why it was not called (``error``); when the
    Run's Agent has ended (``finish`` accepted), ``done`` with the rollout's ``reward``."""

    run_id: str | None = Field(default=None, description="The Run the call went to.")


class EnvState(State):
    """``episode_id`` is the Run's id, ``step_count`` the tool calls it got."""

    task_id: str | None = None
    done: bool = False
    reward: float | None = None


# ------------------------------------------------------------------------- the tasks


class DatasetError(ValueError):
    """A dataset directory that cannot be served; the message says why."""


class TaskRows:
    """The rows ``reset`` may name by ``task_id`` or ``index`` (none without ``--dataset``)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]] = ()) -> None:
        self.rows = [dict(row) for row in rows]
        self._by_id = {row.get("task_id"): row for row in self.rows}

    def __len__(self) -> int:
        return len(self.rows)

    def pick(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The row ``reset``'s arguments name: a whole row as given, else the served row of
        ``task_id=`` or ``index=``. A ``ValueError`` says what is wrong."""
        if any(key in arguments for key in ROW_KEYS):
            return dict(arguments)
        unknown = sorted(set(arguments) - LOOKUP_KEYS)
        if unknown:
            raise ValueError(
                f"unknown reset argument(s) {', '.join(unknown)}: "
                "give task_id=, index= or a whole row of the rl config"
            )
        if not arguments:
            raise ValueError("reset needs task_id=, index= or a whole row of the rl config")
        if len(arguments) > 1:
            raise ValueError("give task_id= or index=, not both")
        if not self.rows:
            raise ValueError(
                "this server serves no dataset (start it with --dataset DIR): "
                "give reset a whole row of the rl config"
            )
        if "task_id" in arguments:
            row = self._by_id.get(arguments["task_id"])
            if row is None:
                raise ValueError(f"no task {arguments['task_id']!r} among the served rows")
            return dict(row)
        index = arguments["index"]
        if not isinstance(index, int) or isinstance(index, bool):
            raise ValueError(f"index must be an integer, not {index!r}")
        if not 0 <= index < len(self.rows):
            raise ValueError(f"index {index} is out of range: {len(self.rows)} rows are served")
        return dict(self.rows[index])


def load_tasks(directory: str, config: str | None, split: str) -> tuple[TaskRows, str]:
    """The rows of ``split`` of the exported dataset in ``directory`` (its ``config``, by
    default ``rl_tools``, else ``rl``), and the config they are of."""
    if not os.path.isdir(directory):  # else `datasets` would look for a Hub repo of that name
        raise DatasetError(f"{directory}: no such directory")
    import datasets

    try:
        names = datasets.get_dataset_config_names(directory)
    except Exception as exc:  # any reason `datasets` gives is the user's to read
        raise DatasetError(f"{directory}: {exc}") from exc
    wanted = (config,) if config is not None else CONFIGS
    chosen = next((name for name in wanted if name in names), None)
    if chosen is None:
        raise DatasetError(
            f"{directory} has no {' or '.join(wanted)} config (it has {', '.join(names) or 'none'})"
        )
    try:
        loaded = datasets.load_dataset(directory, chosen)
    except Exception as exc:
        raise DatasetError(f"{directory}: {exc}") from exc
    if split not in loaded:
        raise DatasetError(
            f"{directory}: the {chosen} config has no {split} split (it has {', '.join(loaded)})"
        )
    return TaskRows(loaded[split]), chosen


# ------------------------------------------------------------------------- the environment


class ServedEnvironment(Environment[Action, Observation, EnvState]):
    """One session's environment: a ``PolicyEvolutionEnv``, made at the first ``reset`` (so
    openenv's per-request ``/metadata`` and ``/schema`` construct nothing heavy), and the
    session's tools called on it. openenv calls ``reset``, ``step`` and ``close`` in one thread
    per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own Run, workspace and Host

    def __init__(self, make_env: Callable[[], Any], tasks: TaskRows) -> None:
        super().__init__()
        self._make_env = make_env
        self._tasks = tasks
        self._env: Any = None
        self._state = EnvState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TaskObservation:
        if seed is not None or episode_id is not None:
            raise ValueError(
                "reset takes no seed or episode_id: the server's --seed seeds the Runs, "
                "and the episode id is the Run's id"
            )
        row = self._tasks.pick(kwargs)
        if self._env is None:
            self._env = self._make_env()
        self._state = EnvState()  # the session's Run, if any, ends in the env's reset
        text = self._env.reset(**row)
        run_id = self._env.run_id
        self._state = EnvState(episode_id=run_id, task_id=row.get("task_id"))
        prompt = row.get("prompt")
        return TaskObservation(
            task_id=row.get("task_id"),
            run_id=run_id,
            prompt=list(prompt) if isinstance(prompt, list) else [],
            text=text or "",
        )

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=TOOLS)
        if not isinstance(action, CallToolAction):  # openenv's validation lets nothing else by
            raise TypeError(f"not a tool call: {type(action).__name__}")
        return self._call(action.tool_name, action.arguments)

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolObservation:
        env = self._env
        if name not in _TOOL_NAMES:
            return self._refused(
                name,
                ToolErrorType.TOOL_NOT_FOUND,
                f"unknown tool {name!r}: the tools are {', '.join(sorted(_TOOL_NAMES))}",
            )
        if env is None or self._state.episode_id is None:
            return self._refused(
                name, ToolErrorType.EXECUTION_ERROR, "no Run in this session: reset first"
            )
        method = getattr(env, name)
        try:  # names only, as TRL calls a tool: the tool itself answers bad values
            inspect.signature(method).bind(**arguments)
        except TypeError as exc:
            return self._refused(name, ToolErrorType.INVALID_ARGS, f"{name}: {exc}")
        answer = method(**arguments)
        state = self._state
        state.step_count = env.tool_calls
        if env.done and not state.done:
            state.done = True
            reward = env.get_reward()  # waits for the Run's Validation and Assessment
            state.reward = reward if math.isfinite(reward) else None  # NaN: a Host fault
        return ToolObservation(
            tool_name=name,
            result=answer,
            run_id=state.episode_id,
            done=state.done,
            reward=state.reward,
        )

    def _refused(self, name: str, kind: ToolErrorType, message: str) -> ToolObservation:
        return ToolObservation(
            tool_name=name,
            error=ToolError(error_type=kind, message=message),
            run_id=self._state.episode_id,
            done=self._state.done,
            reward=self._state.reward,
        )

    @property
    def state(self) -> EnvState:
        return self._state.model_copy()

    def get_metadata(self) -> EnvironmentMetadata:
        from importlib.metadata import version

        return EnvironmentMetadata(
            name="PolicyEvolutionEnv",
            description="Evolve a policy program on an EvoPolicyGym Benchmark: each reset "
            "starts one recorded Run, the tools edit and submit its program, finish ends it "
            "with the held-out, normalized reward.",
            version=version("evopolicygym"),
        )

    def close(self) -> None:
        """The session ended: a Run still open is concluded now (an Agent that exited)."""
        env, self._env = self._env, None
        if env is not None and self._state.episode_id is not None and not self._state.done:
            try:
                env.get_reward()
            except Exception:  # openenv drops the session anyway; the Run can be resumed
                log.warning("closing the Run %s failed", self._state.episode_id, exc_info=True)


# ------------------------------------------------------------------------- the app


def create_app(
    make_env: Callable[[], Any],
    tasks: TaskRows,
    *,
    max_sessions: int,
    token: str | None = None,
) -> Any:
    """The ASGI app: openenv's session server for ``make_env``'s environments, at most
    ``max_sessions`` at once, behind a ``Gate`` (with the ``token``, if any)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI(
        title="EvoPolicyGym training environment",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    server = HTTPEnvServer(
        functools.partial(ServedEnvironment, make_env, tasks),
        CallToolAction,
        ToolObservation,
        max_concurrent_envs=max_sessions,
    )
    # Production mode: no stateless HTTP /reset, /step or /state (see the module docstring).
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    # /mcp would open sessions no reset reaches; a Run is driven over /ws only.
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/mcp"]

    async def not_served() -> JSONResponse:
        detail = f"sessions are served on the WebSocket {SESSION_PATH} only"
        return JSONResponse({"detail": detail}, status_code=404)

    for path, method in (
        ("/reset", "POST"),
        ("/step", "POST"),
        ("/state", "GET"),
        ("/mcp", "POST"),
    ):
        app.add_api_route(path, not_served, methods=[method], include_in_schema=False)
    return Gate(app, token)
