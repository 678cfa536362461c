"""``rl``: one row per task, a prompt plus what a verifiable reward needs.

A task is a Benchmark with its environment parameters, an initial program, the
budget and limits and the train split: Runs that share them share a row. The
``prompt`` is the Host's task and the initial program; the reward columns name
the Benchmark (id, environment digest, score direction) and the train Episodes
(split, pool size, the pool seeds of the recorded Runs and how Episodes and
policy seeds follow from a pool seed), with the baseline and the best train
score recorded so far. Validation and Assessment seeds and evidence are never
read here: a reward computed from these columns can only ever see train
Episodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec
from datasets import Features, Json, List, Value

from evopolicygym.program import Program
from evopolicygym.transcript import KICKOFF, task_files
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.chat import MESSAGES, plain
from evopolicygym_exporters.history import RunHistory, read_history
from evopolicygym_exporters.programs import PROGRAM_FILES, file_rows

__all__ = ["SEED_DERIVATION", "RlExporter", "task_id"]

SEED_DERIVATION = (
    "Episodes: benchmark.plan(train_split, pool_seed, pool_size); index i is the i-th. "
    "Policy seed of index i: evopolicygym.seeds.derive_seed('policy', benchmark_id, train_split, "
    "pool_seed, i). Evaluate a program on them with evopolicygym.evaluate."
)
_BUDGET_KEYS = (
    "episode_budget",
    "episode_pool_size",
    "max_submissions",
    "max_episodes_per_submission",
    "finish_budget_policy",
    "episode_timeout",
    "agent_timeout",
)


def _budget(config: dict[str, Any]) -> dict[str, Any]:
    budget = {key: config.get(key) for key in _BUDGET_KEYS}
    budget["max_candidates"] = (config.get("validation") or {}).get("max_candidates")
    return budget


def task_id(run: RunHistory) -> str:
    """The task a Run was given, as a digest: Benchmark, parameters, initial program, limits."""
    config = run.created.config
    facts = {
        "benchmark_id": run.created.benchmark_id,
        "benchmark_params": config.get("benchmark_params", {}),
        "environment_digest": run.created.environment_digest,
        "initial_program_digest": run.created.initial_program_digest,
        "train_split": config.get("train_split", "train"),
        "budget": _budget(config),
    }
    return "sha256:" + hashlib.sha256(msgspec.json.encode(facts, order="sorted")).hexdigest()


def render_program(program: Program) -> str:
    parts = []
    for row in file_rows(program):
        body = row["content"] if row["content"] is not None else f"[{row['size']} bytes, not text]"
        parts.append(f"### {row['path']}\n```\n{body}\n```")
    return "\n\n".join(parts)


class RlExporter(Exporter):
    name: ClassVar[str] = "rl"
    summary: ClassVar[str] = (
        "one task: `prompt` (the task and the initial program) and a verifiable reward spec "
        "(Benchmark, environment digest, train seeds)"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("reinforcement-learning", "text-generation")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tasks: dict[str, _Task] = {}

    def training_columns(self) -> tuple[str, ...]:
        return ("prompt",)

    def features(self) -> Features:
        return Features(
            {
                "task_id": Value("string"),
                "prompt": MESSAGES,
                "benchmark_id": Value("string"),
                "benchmark_params": Json(),
                "environment_digest": Value("string"),
                "score_direction": Value("string"),
                "primary_metric": Value("string"),
                "initial_program_digest": Value("string"),
                "initial_program": PROGRAM_FILES,
                "budget": Json(),
                "train_split": Value("string"),
                "pool_size": Value("int64"),
                "train_pool_seeds": List(Value("int64")),
                "seed_derivation": Value("string"),
                "baseline_score": Value("float64"),
                "best_known_score": Value("float64"),
                "runs": Value("int32"),
            }
        )

    def rows(self, run: RunHistory) -> Iterator[Row]:
        # Only small aggregates are kept per task; the prompt is built at the end from
        # the task's first Run, read again, so memory does not grow with the Runs.
        key = task_id(run)
        task = self.tasks.setdefault(key, _Task(first_stream=run.stream_id))
        task.runs += 1
        pool_seed = run.created.seeds.get("pool")
        if pool_seed is not None:
            task.pool_seeds.add(pool_seed)
        initial = run.created.initial_program_digest
        for submission in run.published:
            assert submission.score is not None
            if submission.program_digest == initial:
                task.baseline.append(submission.score)
            if run.better(submission.score, task.best):
                task.best = submission.score
        return iter(())

    def finish(self) -> Iterator[Row]:
        for key in sorted(self.tasks):
            task = self.tasks[key]
            run = read_history(self.store, task.first_stream)
            if run is None:  # cannot happen: it was read finished before
                continue
            yield key, self._row(key, run, task)
            self.forget()

    def _row(self, key: str, run: RunHistory, task: _Task) -> dict[str, Any]:
        created = run.created
        spec = created.benchmark_spec
        program = self.program(created.initial_program_digest)
        task_md = run.task_text
        if task_md is None:  # a Run whose Agent never started: the same text, made again
            task_md = task_files(spec, created.config)[0]
        prompt = [
            plain("system", task_md),
            plain("user", f"{KICKOFF}\n\nThe initial program:\n\n{render_program(program)}"),
        ]
        config = created.config
        return {
            "task_id": key,
            "prompt": prompt,
            "benchmark_id": created.benchmark_id,
            "benchmark_params": config.get("benchmark_params", {}),
            "environment_digest": created.environment_digest,
            "score_direction": run.direction,
            "primary_metric": spec.get("primary_metric"),
            "initial_program_digest": program.digest,
            "initial_program": file_rows(program),
            "budget": _budget(config),
            "train_split": config.get("train_split", "train"),
            "pool_size": config.get("episode_pool_size"),
            "train_pool_seeds": sorted(task.pool_seeds),
            "seed_derivation": SEED_DERIVATION,
            "baseline_score": sum(task.baseline) / len(task.baseline) if task.baseline else None,
            "best_known_score": task.best,
            "runs": task.runs,
        }


@dataclass
class _Task:
    first_stream: str
    runs: int = 0
    pool_seeds: set[int] = field(default_factory=set)
    baseline: list[float] = field(default_factory=list)  # train scores of the initial program
    best: float | None = None
