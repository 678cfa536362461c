"""A verifiable reward for the ``rl`` config: a program scored on a row's train Episodes.

``score_program(row, files)`` evaluates a program (``path -> text or bytes``, ``policy.py``
at its top level) in the contained engine on the Episodes of the row's train pool and
returns the Feedback score the Host publishes for a Submission of that program on those
Episodes. The Episodes are planned as the Host planned the pool (``seed_derivation``):
``plan_episodes(benchmark, train_split, pool_seed, pool_size)``, index ``i`` the ``i``-th,
its policy seed ``derive_seed("policy", benchmark_id, train_split, pool_seed, i)``. By
default they are the Episodes ``baseline_score`` was measured on: the row's
``train_indices`` of the pool of ``baseline_pool_seed``, so a program's reward compares
with the baseline like with like; a row without a baseline scores every index of every
pool in ``train_pool_seeds`` (the mean over the pools).

The Benchmark is loaded through the entry points and must be the one the row was recorded
on (``environment_digest``): another environment gives other scores, so it raises
RewardError. A program that cannot run at all (no ``policy.py``, a ``policy.py`` that does
not compile, an invalid file path) scores the Benchmark's failure score, with a warning on
this module's logger, never an exception: a reward must not stop a trainer. Policy failures
in an Episode are scored by the engine as the Host scores them.

``reward_function`` is the same score as a custom reward function of TRL's GRPOTrainer
(called with ``prompts``, ``completions`` and every dataset column as a keyword list;
returns one float per completion). See its docstring for the completion format.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from evopolicygym.evaluation import (
    EvaluationConfig,
    Evaluator,
    PlannedEpisode,
    plan_episodes,
    require_failure_score,
)
from evopolicygym.program import Program, ProgramError
from evopolicygym.registry import load_benchmark

__all__ = [
    "PROGRAM_PREFIX",
    "RewardError",
    "RewardTask",
    "program_files",
    "reward_function",
    "score_program",
]

log = logging.getLogger(__name__)

PROGRAM_PREFIX = "program/"  # where a completion's write_file calls put program files
_HEADING = re.compile(r"#{1,6}[ \t]+`?(?P<path>[^\s`]+)`?")
_FENCE = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)")
_PYTHON = frozenset({"python", "py", "python3"})


class RewardError(ValueError):
    """The row cannot give the score the Host publishes: its Benchmark is not installed or
    has changed, or the row lacks what the Episodes follow from."""


class RewardTask:
    """A row's Benchmark, checked against the row's environment, and its train Episodes."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.row = row
        benchmark_id = row["benchmark_id"]
        try:
            self.benchmark = load_benchmark(benchmark_id, row.get("benchmark_params") or None)
        except Exception as exc:  # a factory may fail in any way
            raise RewardError(f"cannot load benchmark {benchmark_id!r}: {exc}") from exc
        digest = self.benchmark.spec.environment_digest
        if digest != row["environment_digest"]:
            raise RewardError(
                f"benchmark {benchmark_id} is not the one this row was recorded on (environment "
                f"digest {digest}, row {row['environment_digest']}): its scores would not be the "
                "Host's; install the recorded version"
            )
        self.failure_score = require_failure_score(self.benchmark)
        self.split: str = row["train_split"]
        self.pool_size: int = row["pool_size"]

    def indices(self, indices: Sequence[int] | None = None) -> list[int]:
        """``indices``, else the row's ``train_indices`` (the baseline's), else every pool index."""
        if indices is None:
            indices = self.row.get("train_indices")
        chosen = list(range(self.pool_size)) if indices is None else [int(i) for i in indices]
        outside = [i for i in chosen if not 0 <= i < self.pool_size]
        if outside or not chosen:
            raise RewardError(
                f"train indices {chosen} are not a non-empty subset of 0..{self.pool_size - 1}"
            )
        return chosen

    def pool_seeds(self, pool_seeds: Sequence[int] | None = None) -> list[int]:
        """``pool_seeds``, else the baseline's pool, else the row's ``train_pool_seeds``."""
        if pool_seeds is None:
            baseline = self.row.get("baseline_pool_seed")
            pool_seeds = (
                [baseline] if baseline is not None else self.row.get("train_pool_seeds") or ()
            )
        if not pool_seeds:
            raise RewardError("the row has no train pool seed: its Episodes are unknown")
        return [int(seed) for seed in pool_seeds]

    def episodes(self, pool_seed: int, indices: Sequence[int]) -> list[PlannedEpisode]:
        """The pool of ``pool_seed``, as the Host planned it, at ``indices``."""
        pool = plan_episodes(self.benchmark, self.split, pool_seed, self.pool_size)
        return [pool[i] for i in indices]


def _program(files: Mapping[str, str | bytes]) -> Program | str:
    """``files`` as a Program, or why they cannot run as one."""
    source = files.get("policy.py")
    if source is None:
        return "no policy.py at the program's top level"
    try:
        program = Program.from_files(files)
        compile(source, "policy.py", "exec", dont_inherit=True)
    except (ProgramError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return program


def score_program(
    row: Mapping[str, Any],
    files: Mapping[str, str | bytes],
    *,
    indices: Sequence[int] | None = None,
    pool_seeds: Sequence[int] | None = None,
    jobs: int | None = None,
    episode_timeout: float | None = None,
    evaluator: Evaluator | None = None,
    task: RewardTask | None = None,
) -> float:
    """The Feedback score the Host publishes for ``files`` on the ``rl`` row's train Episodes.

    ``indices`` (default: the row's ``train_indices``, else every pool index) and
    ``pool_seeds`` (default: the row's ``baseline_pool_seed``, else ``train_pool_seeds``;
    several give the mean of the per-pool scores) choose the Episodes; ``jobs`` (default:
    one per CPU) and ``episode_timeout`` (default: the row's, as the Host ran it) set the
    engine, and an
    ``evaluator`` kept across calls saves starting one each time, as ``task`` (the row's
    RewardTask) saves loading the Benchmark again. Raises RewardError when the row's
    Benchmark cannot be loaded or has another environment digest, and EvaluationError on a
    fault of the Environment or the Host; a malformed program scores the Benchmark's
    failure score, with a warning.
    """
    task = RewardTask(row) if task is None else task
    chosen, seeds = task.indices(indices), task.pool_seeds(pool_seeds)
    program = _program(files)
    if isinstance(program, str):
        log.warning(
            "%s: the program scores the failure score %g: %s",
            row["benchmark_id"],
            task.failure_score,
            program,
        )
        return task.failure_score
    config = EvaluationConfig(split=task.split, episodes=len(chosen), jobs=jobs, trace_steps=0)
    timeout = episode_timeout or (row.get("budget") or {}).get("episode_timeout")
    if timeout:  # as the Host ran the Episodes
        config = msgspec.structs.replace(config, episode_timeout=float(timeout))
    engine = evaluator or Evaluator()
    try:
        results = [
            engine.evaluate(program, task.benchmark, config, episodes=task.episodes(s, chosen))
            for s in seeds
        ]
    finally:
        if evaluator is None:
            engine.close()
    return math.fsum(r.feedback.score for r in results) / len(results)


# --------------------------------------------------------------------------- completions


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text") or "" for p in content if isinstance(p, Mapping))
    return ""


def _written(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The files that ``write_file`` calls put under ``program/``, the last write winning."""
    files: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            if function.get("name") != "write_file":
                continue
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            if not isinstance(arguments, Mapping):
                continue
            path, content = arguments.get("path"), arguments.get("content")
            if isinstance(content, str) and str(path).startswith(PROGRAM_PREFIX):
                files[str(path).removeprefix(PROGRAM_PREFIX)] = content
    return files


def _fenced(text: str) -> dict[str, str]:
    """Files in fenced blocks: one under a ``### <path>`` heading is that file (the format
    the prompt shows the initial program in); else the last ``python`` block is policy.py."""
    files: dict[str, str] = {}
    python: str | None = None
    heading: str | None = None
    lines = iter(text.splitlines())
    for line in lines:
        opened = _FENCE.fullmatch(line.strip())
        if opened is None:
            named = _HEADING.fullmatch(line.strip())
            if named is not None:
                heading = named["path"].removeprefix(PROGRAM_PREFIX)
            elif line.strip():
                heading = None
            continue
        fence = opened["fence"]
        closing = re.compile(f"{re.escape(fence[0])}{{{len(fence)},}}")
        body = []
        for inner in lines:  # up to the closing fence (or the end of the text)
            if closing.fullmatch(inner.strip()):
                break
            body.append(inner + "\n")
        if heading is not None:
            files[heading] = "".join(body)
        elif opened["info"].split(" ")[0].lower() in _PYTHON:
            python = "".join(body)
        heading = None
    if python is not None:
        files.setdefault("policy.py", python)
    return files


def program_files(completion: str | Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The program files a completion writes (empty when it writes none).

    A conversational completion (a list of messages) writes files with ``write_file`` tool
    calls whose path is under ``program/`` (the Agent's tool: ``program/policy.py`` is
    ``policy.py``); when it makes none, or a completion is plain text, its fenced code
    blocks are read: a block right under a ``### <path>`` heading is that file, and else
    the last block tagged ``python`` is ``policy.py``. Other tools (``edit_file`` among
    them) write nothing here: a completion states whole files.
    """
    if isinstance(completion, str):
        return _fenced(completion)
    messages = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return _written(messages) or _fenced("\n\n".join(_text(m.get("content")) for m in messages))


def _initial(row: Mapping[str, Any]) -> dict[str, str]:
    """The row's initial program as text files (a file that is not text cannot be rebuilt)."""
    if row.get("redacted"):
        log.warning("the initial program is redacted: programs start from its exported text")
    files = {}
    for entry in row.get("initial_program") or ():
        if entry.get("content") is None:
            log.warning("%s of the initial program is not text: left out", entry.get("path"))
            continue
        files[entry["path"]] = entry["content"]
    return files


_ROW_COLUMNS = (
    "benchmark_id",
    "benchmark_params",
    "environment_digest",
    "score_direction",
    "initial_program",
    "budget",
    "train_split",
    "pool_size",
    "train_pool_seeds",
    "train_indices",
    "baseline_pool_seed",
    "baseline_score",
    "redacted",
)


def reward_function(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    completion_ids: Sequence[Any] | None = None,
    *,
    relative: bool = False,
    jobs: int | None = None,
    episode_timeout: float | None = None,
    **columns: Any,
) -> list[float | None]:
    """A custom reward function for TRL's GRPOTrainer over the ``rl`` config.

    TRL calls it with ``prompts``, ``completions``, ``completion_ids`` and every dataset
    column as a keyword list (one item per completion), plus ``trainer_state``,
    ``log_extra`` and ``log_metric``, which are ignored. Each completion's program is the
    row's initial program with the files the completion writes (``program_files``) written
    over it, as an Agent's workspace starts from the initial program; a completion that
    writes no file gets the failure score.

    Returns, per completion, the score of ``score_program`` on the row's train Episodes,
    or with ``relative=True`` (``functools.partial(reward_function, relative=True)``) its
    improvement over the row's ``baseline_score`` in the row's ``score_direction``
    (positive is better; None, which TRL skips, for a row without a baseline score).
    Identical programs of one task are evaluated once per call; ``jobs`` and
    ``episode_timeout`` go to ``score_program`` (bind them with ``functools.partial``).
    """
    count = len(completions)
    if len(prompts) != count:
        raise ValueError(f"{len(prompts)} prompts for {count} completions")
    rows = [
        {key: columns[key][i] for key in _ROW_COLUMNS if isinstance(columns.get(key), list)}
        for i in range(count)
    ]
    tasks: dict[str, RewardTask] = {}
    scored: dict[tuple[str, str], float] = {}  # (task, files) -> score: it is deterministic
    rewards: list[float | None] = []
    with Evaluator() as evaluator:
        for row, completion in zip(rows, completions, strict=True):
            key = json.dumps(row, sort_keys=True, default=str)
            task = tasks.get(key)
            if task is None:
                task = tasks[key] = RewardTask(row)
            written = program_files(completion)
            if not written:
                log.warning("a completion writes no program: it scores %g", task.failure_score)
                score = task.failure_score
            else:
                files = {**_initial(row), **written}
                program = (key, json.dumps(files, sort_keys=True))
                if program not in scored:
                    scored[program] = score_program(
                        row,
                        files,
                        jobs=jobs,
                        episode_timeout=episode_timeout,
                        evaluator=evaluator,
                        task=task,
                    )
                score = scored[program]
            rewards.append(_relative(row, score) if relative else score)
    return rewards


def _relative(row: Mapping[str, Any], score: float) -> float | None:
    baseline = row.get("baseline_score")
    if baseline is None:
        return None
    sign = -1.0 if row.get("score_direction") == "minimize" else 1.0
    return sign * (score - float(baseline))
