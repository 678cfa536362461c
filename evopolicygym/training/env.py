"""``PolicyEvolutionEnv``: a Run as a live environment for TRL's ``environment_factory``.

GRPOTrainer makes one instance per concurrent rollout (with no arguments: bind these
options with ``functools.partial``), calls ``reset(**row)`` with a dataset row, exposes
every public method as a tool (its JSON schema from the type hints and the Google-style
docstring) and, since the class defines ``get_reward``, scores the rollout with it. So:
no public method but the tools, ``reset`` and ``get_reward``; every bad input is a tool
answer the model reads, never an exception in the trainer.

Each ``reset`` starts one real Run in the store (agent provider ``trainer``) under the
rules of a CLI Run; its Host runs in a thread of its own, and the tools reach its Session
over the same protocol ``./evopolicy session`` speaks. ``get_reward`` ends the model's
turn, waits for Validation and Assessment and returns the normalized held-out result
(``training.reward``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from evopolicygym.agents.chat_tools import ToolError, Workspace
from evopolicygym.evaluation import Evaluator, make_evaluator
from evopolicygym.program import submitted_files
from evopolicygym.protocol import SessionUnavailable, finish_request, request, submit_request
from evopolicygym.records.location import Store, open_store
from evopolicygym.run.create import create_run
from evopolicygym.training import files
from evopolicygym.training.progress import TrainingProgress
from evopolicygym.training.reward import NO_HANDOFF, ReferenceScores, run_reward
from evopolicygym.training.rollout import Rollout, TrainerAgent
from evopolicygym.training.tasks import RunSettings, TrainingTask, task_of
from evopolicygym.transcript import AgentIdentity, Message, ToolCall

__all__ = ["PolicyEvolutionEnv"]

log = logging.getLogger(__name__)

RESULT_CHARS = 24_000  # of any tool answer, as the model reads it
_REFERENCES = ReferenceScores()  # I and R, shared by every instance: a GRPO group's are one


class PolicyEvolutionEnv:
    """One rollout at a time as one Run; see the module docstring and the tutorial
    "Train a coding agent with GRPO".

    Args (keyword-only, bound with ``functools.partial``):
        store: the store Runs are recorded in (a directory or a ``postgresql://`` URL;
            default ``$EVOPOLICY_STORE``, else ``evopolicy-store``), or an open ``Store``.
        model: the model's name, recorded as the Agent's.
        progress: a ``TrainingProgress`` also given to the trainer as a callback: Runs then
            record the trainer's step, and each step plays fresh Episodes.
        seed: mixed into every Run's seed (with the row's task and the step).
        episode_budget: the Runs' budget instead of the row's (pool and limits follow it).
        validation_episodes, assessment_episodes: Host-only Episodes per candidate and for
            the selected Program (the reward's evidence).
        agent_timeout: the model's wall-clock seconds per Run, instead of the row's.
        jobs: evaluation processes (default: one per CPU).
        executor, ray_address: where Episodes are played (``local`` or ``ray``).
    """

    def __init__(
        self,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        model: str | None = None,
        progress: TrainingProgress | None = None,
        seed: int = 0,
        episode_budget: int | None = None,
        validation_episodes: int = 8,
        assessment_episodes: int = 16,
        agent_timeout: float | None = None,
        jobs: int | None = None,
        executor: str = "local",
        ray_address: str | None = None,
    ) -> None:
        self._store = store if isinstance(store, Store) else open_store(store, create=True)
        self._model = model
        self._progress = progress
        self._settings = RunSettings(
            seed=seed,
            episode_budget=episode_budget,
            validation_episodes=validation_episodes,
            assessment_episodes=assessment_episodes,
            agent_timeout=agent_timeout,
            jobs=jobs,
        )
        self._executor = (executor, ray_address)
        self._evaluator: Evaluator | None = None
        self._rollout: Rollout | None = None
        self._agent: TrainerAgent | None = None
        self._task: TrainingTask | None = None
        self._reward: float | None = None
        self._calls = itertools.count(1)
        self._tool_calls = 0

    # ----------------------------------------------------------------- read-only state
    # Properties, not methods: TRL makes every public function a tool, never a property.

    @property
    def run_id(self) -> str | None:
        """The current rollout's Run, None before the first ``reset``."""
        return self._rollout.run_id if self._rollout is not None else None

    @property
    def done(self) -> bool:
        """Whether the model's turn is over: a ``finish`` accepted, or the Host stopped it."""
        return self._agent is None or self._agent.ended

    @property
    def tool_calls(self) -> int:
        """Tool calls since the last ``reset``."""
        return self._tool_calls

    # ----------------------------------------------------------------- what TRL calls

    def reset(self, **row: Any) -> str | None:
        """Start a Run of the task in ``row`` (a row of the ``rl_tools`` or ``rl`` export config).

        Returns what the row's prompt lacks for this Run (TRL appends it to the last user
        message): nothing when the prompt holds this Run's task text, else that text.
        """
        self._conclude()
        step = self._progress.step if self._progress is not None else None
        task = task_of(row, self._store, self._settings, step)
        options: dict[str, Any] = {"task_id": task.task_id}
        if step is not None:
            options["trainer_step"] = step
        identity = AgentIdentity(
            name="trainer", provider="trainer", model=self._model, options=options
        )
        run_id = create_run(
            self._store,
            task.benchmark,
            task.config,
            identity,
            benchmark_id=task.benchmark_id,
            program=task.program,
            # The model never runs a process of its own: it reaches the workspace only
            # through the tools, which hold every path inside it.
            agent_containment="tools",
        )
        if self._evaluator is None:
            self._evaluator = make_evaluator(self._executor[0], address=self._executor[1])
            weakref.finalize(self, self._evaluator.close)
        rollout = Rollout(self._store, run_id, self._evaluator)
        self._rollout, self._task, self._reward = rollout, task, None
        self._agent = agent = rollout.start()
        self._calls = itertools.count(1)
        self._tool_calls = 0
        task_md = rollout.launcher.task or ""
        extra = None if _system_text(row.get("prompt")) == task_md else _replacing(task_md)
        agent.deliver(
            Message(role="user", content=(task.user_turn or "") + (extra or ""), at=_now())
        )
        return extra

    def get_reward(self) -> float:
        """The rollout's reward: its Run's held-out result, normalized (see the docs)."""
        if self._reward is not None:
            return self._reward
        rollout, task = self._rollout, self._task
        if rollout is None or task is None:
            return NO_HANDOFF
        state, error = rollout.result()
        if error is not None:
            log.warning("the Run %s stopped on a Host error: %r", rollout.run_id, error)
        reference = None
        if state.handoff == "agent" and state.assessment_score is not None:
            assert self._evaluator is not None
            try:
                reference = _REFERENCES.of(
                    self._evaluator,
                    task.benchmark,
                    task.program,
                    task.config,
                    state.seeds["assessment"],
                )
            except Exception:
                log.warning("the reference scores of %s failed", task.task_id, exc_info=True)
        self._reward = run_reward(state, reference)
        return self._reward

    # ----------------------------------------------------------------- the tools

    def list_files(self) -> str:
        """List the workspace's files with their sizes."""
        return self._tool("list_files", {}, lambda ws: files.list_files(ws))

    def read_file(self, path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: A path relative to the workspace, like TASK.md or program/policy.py.
        """
        return self._tool("read_file", {"path": path}, lambda ws: files.read_file(ws, path))

    def write_file(self, path: str, content: str) -> str:
        """Create or replace a text file under program/ or analysis/.

        Args:
            path: A path under program/ or analysis/, like program/policy.py.
            content: The whole new content.
        """
        return self._tool(
            "write_file",
            {"path": path, "content": content},
            lambda ws: files.write_file(ws, path, content),
        )

    def submit(self, episodes: str) -> str:
        """Evaluate program/ on Episodes of the Run's pool; each Episode costs budget.

        Args:
            episodes: Pool indices: `3`, `0:4` (half-open) or `0:2,4:8`.
        """
        return self._tool("submit", {"episodes": episodes}, lambda ws: self._submit(ws, episodes))

    def finish(self, candidates: list[int]) -> str:
        """Finish the Run, naming Submission ids as the final candidates, best first.

        Args:
            candidates: Submission ids, best first (ids from submit).
        """
        return self._tool("finish", {"candidates": candidates}, lambda ws: self._finish(candidates))

    # ----------------------------------------------------------------- internals

    def _tool(self, name: str, arguments: dict[str, Any], run: Callable[[Workspace], str]) -> str:
        agent = self._agent
        if agent is None:
            return "error: session_closed: no Run has been started (reset first)"
        self._tool_calls += 1
        call = ToolCall(id=f"call_{next(self._calls)}", name=name, arguments=arguments)
        agent.deliver(
            Message(role="assistant", tool_calls=[call], model=self._model, at=_now())
        )  # before the request's events, as a CLI's stream would be
        if agent.ended:
            answer = "error: session_closed: this Run's session has ended"
        else:
            try:
                answer = run(Workspace(agent.workspace))
            except ToolError as exc:
                answer = f"error: {exc}"
            except Exception as exc:  # a tool's own bug must not reach the trainer
                log.warning("the %s tool failed", name, exc_info=True)
                answer = f"error: internal_error: {type(exc).__name__}: {exc}"
        answer = _bounded(answer)
        agent.deliver(
            Message(role="tool", content=answer, tool_call_id=call.id, name=name, at=_now())
        )
        return answer

    def _submit(self, workspace: Workspace, episodes: Any) -> str:
        if not isinstance(episodes, str):
            episodes = str(episodes)
        files, problem = submitted_files(workspace.root / "program")  # a problem is recorded
        return self._call(submit_request(episodes, files, problem, None))

    def _finish(self, candidates: Any) -> str:
        assert self._agent is not None
        if isinstance(candidates, int) and not isinstance(candidates, bool):
            candidates = [candidates]
        if not isinstance(candidates, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in candidates
        ):
            return "error: invalid_request: candidates must be a list of Submission ids"
        answer = self._call(finish_request(candidates))
        if not answer.startswith("error:"):
            self._agent.end(0)  # the model's turn is over: the Host validates and assesses
        return answer

    def _call(self, body: dict[str, Any]) -> str:
        assert self._agent is not None
        try:
            reply = request(self._agent.session, body)
        except SessionUnavailable as exc:
            return f"error: session_closed: {exc}"
        if not reply["ok"]:
            error = reply["error"]
            return f"error: {error['code']}: {error['message']}"
        return json.dumps(reply["result"], indent=1, sort_keys=True, ensure_ascii=False)

    def _conclude(self) -> None:
        """A rollout never scored (its reward unread) ends now, as an Agent that exited."""
        if self._rollout is not None and self._reward is None:
            self._rollout.result()
        self._rollout = self._agent = self._task = None


def _now() -> int:
    return time.time_ns()


def _bounded(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return f"{text[:RESULT_CHARS]}\n[... {len(text) - RESULT_CHARS} characters left out]"


def _system_text(prompt: Any) -> str | None:
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, Mapping) and message.get("role") == "system":
                content = message.get("content")
                return content if isinstance(content, str) else None
    return None


def _replacing(task_md: str) -> str:
    return f"\n\nThe task of this Run, which replaces any task above:\n\n{task_md}"
