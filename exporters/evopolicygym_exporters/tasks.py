"""The task a Run was given, as a digest: what ``rl`` rows are and what splits group by.

A task is a Benchmark with its parameters (and the environment digest they give), an
initial program, the train split and the budget and limits: Runs that share them were
asked the same question, so by default every config keeps a task's rows in one split
(``ExportOptions.split_by``), and ``rl`` has one row per task.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from datasets import Value

from evopolicygym.transcript import BUDGET_FIELDS
from evopolicygym_exporters.history import RunHistory

__all__ = ["BUDGET_KEYS", "CATALOG", "budget", "catalog_of", "task_id"]

BUDGET_KEYS = BUDGET_FIELDS  # a task's public budget and limits


# The Benchmark's catalog entry as its recorded spec states it (``evopolicygym.benchmark``'s
# CatalogEntry): its family, the difficulty profile the Run was given and that profile's rank
# (0 = easiest), and the baseline and uniform-random scores the family measured on the
# assessment split. A curriculum orders tasks by these; nulls where a Benchmark declares none.
CATALOG = {
    "family": Value("string"),
    "profile": Value("string"),
    "difficulty": Value("int32"),
    "reference_baseline": Value("float64"),
    "reference_random": Value("float64"),
}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def catalog_of(run: RunHistory) -> dict[str, Any]:
    """The ``task_catalog`` value of a Run (see ``CATALOG``), from its recorded spec."""
    metadata = (run.created.benchmark_spec or {}).get("metadata") or {}
    references = metadata.get("reference_scores") or {}
    difficulty = metadata.get("difficulty")
    return {
        "family": metadata.get("family") if isinstance(metadata.get("family"), str) else None,
        "profile": metadata.get("profile") if isinstance(metadata.get("profile"), str) else None,
        "difficulty": difficulty
        if isinstance(difficulty, int) and not isinstance(difficulty, bool)
        else None,
        "reference_baseline": _number(references.get("baseline")),
        "reference_random": _number(references.get("random")),
    }


_DEFAULT_FEEDBACK = {"traces": "benchmark", "trace_steps": None, "episodes": True, "content": True}


def budget(config: dict[str, Any]) -> dict[str, Any]:
    """A Run's public budget and limits, from its recorded config (never its seed)."""
    found = {key: config.get(key) for key in BUDGET_KEYS}
    found["max_candidates"] = (config.get("validation") or {}).get("max_candidates")
    return found


def task_id(run: RunHistory) -> str:
    """The task a Run was given, as a digest: Benchmark, parameters, initial program, limits."""
    config = run.created.config
    facts = {
        "benchmark_id": run.created.benchmark_id,
        "benchmark_params": config.get("benchmark_params", {}),
        "environment_digest": run.created.environment_digest,
        "initial_program_digest": run.created.initial_program_digest,
        "train_split": config.get("train_split", "train"),
        "budget": budget(config),
    }
    # What the Agent was shown is part of its task; the default condition (and a config
    # recorded before the setting) leaves the facts, so every earlier task id, unchanged.
    feedback = config.get("feedback")
    if feedback and {**_DEFAULT_FEEDBACK, **feedback} != _DEFAULT_FEEDBACK:
        facts["feedback"] = {**_DEFAULT_FEEDBACK, **feedback}
    return "sha256:" + hashlib.sha256(msgspec.json.encode(facts, order="sorted")).hexdigest()
