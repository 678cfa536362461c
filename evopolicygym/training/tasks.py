"""A row of the ``rl`` export config as the task of one training Run.

TRL passes every column of a dataset row to ``reset``; what a Run needs of them is the
Benchmark (id, parameters, the environment it was recorded on), the initial Program and
the budget. The Run's seed follows from the task, the environment's own seed and the
trainer's step, so every generation of one row in one step (GRPO's group) plays the same
Episodes, and the next step plays others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evopolicygym.benchmark import Benchmark
from evopolicygym.program import Program, ProgramError
from evopolicygym.records.location import Store
from evopolicygym.registry import load_benchmark
from evopolicygym.run.config import AssessmentConfig, RunConfig, RunConfigError, ValidationConfig
from evopolicygym.seeds import derive_seed
from evopolicygym.transcript import BUDGET_FIELDS

__all__ = ["RowError", "RunSettings", "TrainingTask", "task_of"]


class RowError(ValueError):
    """A dataset row that cannot become a Run; the message names the column."""


@dataclass(frozen=True)
class TrainingTask:
    """What one Run of a row is made of."""

    task_id: str
    benchmark_id: str
    benchmark: Benchmark
    program: Program
    config: RunConfig  # resolved
    user_turn: str | None  # the row's prompt's last user message, as the model got it


@dataclass(frozen=True)
class RunSettings:
    """The environment's own settings, the same for every row (``PolicyEvolutionEnv``'s)."""

    seed: int = 0
    episode_budget: int | None = None
    validation_episodes: int = 8
    assessment_episodes: int = 16
    agent_timeout: float | None = None
    jobs: int | None = None


def _column(row: Mapping[str, Any], name: str) -> Any:
    if name not in row or row[name] is None:
        raise RowError(f"the row has no {name!r} column: give a row of the `rl` export config")
    return row[name]


def _program(row: Mapping[str, Any], store: Store) -> Program:
    """The row's initial Program: its files as exported, or the store's copy where the row's
    text cannot be it (a binary file, redacted text)."""
    digest = _column(row, "initial_program_digest")
    files = row.get("initial_program") or []
    if all(isinstance(f, Mapping) and isinstance(f.get("content"), str) for f in files):
        try:
            program = Program.from_files({f["path"]: f["content"].encode() for f in files})
        except (ProgramError, KeyError, TypeError):
            program = None
        if program is not None and program.digest == digest:
            return program
    try:
        return store.blobs.get_program(digest)
    except Exception as exc:
        raise RowError(
            f"the row's initial program ({digest}) is neither whole in the row nor in the store"
        ) from exc


def task_of(
    row: Mapping[str, Any], store: Store, settings: RunSettings, step: int | None
) -> TrainingTask:
    """The Run a row asks for, checked: the Benchmark installed and unchanged, the config valid."""
    task_id = str(_column(row, "task_id"))
    benchmark_id = str(_column(row, "benchmark_id"))
    params = row.get("benchmark_params") or {}
    if not isinstance(params, Mapping):
        raise RowError("the row's benchmark_params is not an object")
    try:
        benchmark = load_benchmark(benchmark_id, dict(params) or None)
    except Exception as exc:  # a factory may fail in any way
        raise RowError(f"cannot load benchmark {benchmark_id!r}: {exc}") from exc
    digest = row.get("environment_digest")
    if digest is not None and digest != benchmark.spec.environment_digest:
        raise RowError(
            f"{benchmark_id}: the installed environment ({benchmark.spec.environment_digest}) "
            f"is not the one the row was recorded on ({digest})"
        )
    budget = row.get("budget") or {}
    if not isinstance(budget, Mapping):
        raise RowError("the row's budget is not an object")
    known = {key: budget[key] for key in BUDGET_FIELDS if budget.get(key) is not None}
    if settings.episode_budget is not None:  # the pool and limits follow the new budget
        for key in ("episode_pool_size", "max_submissions", "max_episodes_per_submission"):
            known.pop(key, None)
        known["episode_budget"] = settings.episode_budget
    if settings.agent_timeout is not None:
        known["agent_timeout"] = settings.agent_timeout
    candidates = budget.get("max_candidates") or ValidationConfig().max_candidates
    seed_parts: list[int | str] = [task_id, settings.seed]
    if step is not None:
        seed_parts.append(step)
    try:
        config = RunConfig(
            benchmark_params=dict(params),
            train_split=str(row.get("train_split") or "train"),
            validation=ValidationConfig(
                episodes_per_candidate=settings.validation_episodes,
                max_candidates=int(candidates),
            ),
            assessment=AssessmentConfig(episodes=settings.assessment_episodes),
            seed=derive_seed("training", *seed_parts),
            jobs=settings.jobs,
            **known,
        ).resolved()
    except (RunConfigError, TypeError, ValueError) as exc:
        raise RowError(f"the row's budget cannot make a Run: {exc}") from exc
    return TrainingTask(
        task_id=task_id,
        benchmark_id=benchmark_id,
        benchmark=benchmark,
        program=_program(row, store),
        config=config,
        user_turn=_user_turn(row.get("prompt")),
    )


def _user_turn(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, Mapping) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else None
    return None
