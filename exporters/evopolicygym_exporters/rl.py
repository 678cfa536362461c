"""``rl``: one row per task, a prompt plus what a verifiable reward needs.

A task is a Benchmark with its environment parameters, an initial program, the
budget and limits and the train split: Runs that share them share a row. The
``prompt`` is the Host's task and the initial program; the reward columns name
the Benchmark (id, environment digest, score direction) and the train Episodes
(split, pool size, the pool seeds of the recorded Runs and how Episodes and
policy seeds follow from a pool seed), with the baseline and the best train
score recorded so far. ``baseline_score`` is one score the Host published for the
initial program, and the row says on which Episodes: ``train_indices`` of the pool of
``baseline_pool_seed`` (the task's first Run that submitted the initial program
unchanged; its Submission with the most Episodes, the earliest of equals), so
``rewards.score_program(row, initial program)`` reproduces it exactly. Validation and
Assessment seeds and Episodes are never read here: a reward computed from these columns
can only ever see train
Episodes. The task's difficulty is its parameters and ``reference_score``: the
initial program's Validation score, averaged over the task's Runs that measured it
(``reference_score_runs``), a label beside the prompt, never in it.

``rl_tools`` is the same rows with the task in tool form, for a trainer whose model
reaches the Session as tools (``evopolicygym.training.PolicyEvolutionEnv``:
``GRPOTrainer(train_dataset=load_dataset(dir, "rl_tools"), environment_factory=...)``):
the system message is the task text as the Host writes it for such a model
(``task_files(..., session="tools")``: ``submit(episodes)``, ``finish(candidates)``, never
``./evopolicy session``), the user message the same kickoff and initial program. ``rl``
keeps the shell form even when a task's first Run was a trainer's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from datasets import Features, Json, List, Value

from evopolicygym.program import Program
from evopolicygym.transcript import KICKOFF, TOOL_SESSION_PROVIDERS, task_files
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.chat import MESSAGES, plain
from evopolicygym_exporters.history import RunHistory, read_history
from evopolicygym_exporters.programs import PROGRAM_FILES, file_rows
from evopolicygym_exporters.tasks import CATALOG, budget, catalog_of, task_id

__all__ = ["SEED_DERIVATION", "RlExporter", "RlToolsExporter", "task_id"]

SEED_DERIVATION = (
    "Episodes: benchmark.plan(train_split, pool_seed, pool_size); index i is the i-th. "
    "Policy seed of index i: evopolicygym.seeds.derive_seed('policy', benchmark_id, train_split, "
    "pool_seed, i). Evaluate a program on them with evopolicygym.evaluate."
)


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
    # How the prompt's task says to reach the Session: shell commands, or tools.
    session: ClassVar[Literal["cli", "tools"]] = "cli"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tasks: dict[str, _Task] = {}

    def training_columns(self) -> tuple[str, ...]:
        return ("prompt",)

    def identity(self, row: dict[str, Any]) -> str | None:
        return None  # a row is a task, and its group

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
                "train_indices": List(Value("int64")),
                "baseline_pool_seed": Value("int64"),
                "best_known_score": Value("float64"),
                "reference_score": Value("float64"),
                "reference_score_runs": Value("int32"),
                "task_catalog": CATALOG,
                "runs": Value("int32"),
                "redacted": Value("bool"),
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
        if run.reference_score is not None:
            task.reference.append(run.reference_score)
        initial = run.created.initial_program_digest
        for submission in run.published:
            assert submission.score is not None
            if (
                submission.program_digest == initial
                and pool_seed is not None
                and (
                    task.baseline is None
                    or (
                        task.baseline[0] == pool_seed
                        and len(submission.indices) > len(task.baseline[1])
                    )
                )
            ):
                task.baseline = (pool_seed, list(submission.indices), submission.score)
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
        prompt = [
            plain("system", self.task_text(run)),
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
            "budget": budget(config),
            "train_split": config.get("train_split", "train"),
            "pool_size": config.get("episode_pool_size"),
            "train_pool_seeds": sorted(task.pool_seeds),
            "seed_derivation": SEED_DERIVATION,
            "baseline_score": None if task.baseline is None else task.baseline[2],
            "train_indices": None if task.baseline is None else task.baseline[1],
            "baseline_pool_seed": None if task.baseline is None else task.baseline[0],
            "best_known_score": task.best,
            "reference_score": sum(task.reference) / len(task.reference)
            if task.reference
            else None,
            "reference_score_runs": len(task.reference),
            "task_catalog": catalog_of(run),
            "runs": task.runs,
        }

    def task_text(self, run: RunHistory) -> str:
        """The task as the Host gave it to ``run``'s Agent, in this config's session form:
        the recorded text where the Agent was told in that form (the same text made again
        for a Run whose Agent never started), else made in it with the Run's skills."""
        created = run.created
        recorded = run.task_text
        told = "tools" if created.agent.provider in TOOL_SESSION_PROVIDERS else "cli"
        if recorded is None:
            return task_files(created.benchmark_spec, created.config, session=self.session)[0]
        if told == self.session:
            return recorded
        return task_files(
            created.benchmark_spec, created.config, skills_in(recorded), session=self.session
        )[0]


class RlToolsExporter(RlExporter):
    name: ClassVar[str] = "rl_tools"
    summary: ClassVar[str] = (
        "one task, as `rl`, with the task text in tool form (`submit(episodes)`, "
        "`finish(candidates)`): the prompt of a trainer's `environment_factory` "
        "(`PolicyEvolutionEnv`)"
    )
    session: ClassVar[Literal["cli", "tools"]] = "tools"


_SKILLS_HEADING = "\n## Skills (read these first)\n"
_SKILL_LINE = re.compile(r"- `skills/([^`/]+)/SKILL\.md`(?: — (.*))?")


def skills_in(task_md: str) -> list[tuple[str, str]]:
    """The skills (name, description) a task text lists, as ``task_files`` lists them last:
    a text made again in another session form names the same ones."""
    _, heading, listed = task_md.rpartition(_SKILLS_HEADING)
    if not heading:
        return []
    found = []
    for line in listed.splitlines():
        match = _SKILL_LINE.fullmatch(line)
        if match is not None:
            found.append((match.group(1), match.group(2) or ""))
    return found


@dataclass
class _Task:
    first_stream: str
    runs: int = 0
    pool_seeds: set[int] = field(default_factory=set)
    # (pool seed, indices, score): the initial program as first submitted unchanged
    baseline: tuple[int, list[int], float] | None = None
    best: float | None = None
    reference: list[float] = field(default_factory=list)  # the initial program's Validation scores
