"""What every exporter is: a named, versioned row builder over Run histories.

An exporter declares its ``datasets.Features`` up front and turns each
``RunHistory`` into rows, each with the key its split is hashed from (a Run id,
or a task id for per-task rows), so rows of one Run or task never straddle
splits. Exporters that aggregate over Runs (``rl``) emit their rows from
``finish``. ``training_columns()`` names the columns a trainer feeds a model;
held-out evidence and Host-private values must never reach them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from datasets import Features

from evopolicygym.program import Program
from evopolicygym.records.location import Store
from evopolicygym_exporters.history import RunFilter, RunHistory

__all__ = ["DEFAULT_SHARD_BYTES", "ExportOptions", "Exporter", "Row"]

DEFAULT_SHARD_BYTES = 256 * 1024 * 1024

Row = tuple[str, dict[str, Any]]  # (split key, row)


@dataclass(frozen=True)
class ExportOptions:
    run_filter: RunFilter = field(default_factory=RunFilter)
    test_fraction: float = 0.1
    max_shard_bytes: int = DEFAULT_SHARD_BYTES
    success_only: bool = False  # sft, distill: only Runs that selected and measured a program
    per_turn: bool = False  # sft, distill: prompt/completion rows ending at each assistant turn
    teacher: tuple[str, ...] = ()  # distill: agent names, providers or models to keep
    dpo_min_margin: float = 0.0  # dpo: the least score difference of a pair (always > 0)
    dpo_max_pairs: int = 64  # dpo: pairs per Run, widest margins first
    license: str = "other"

    def __post_init__(self) -> None:
        if not 0.0 <= self.test_fraction < 1.0:
            raise ValueError("test fraction must be in [0, 1)")
        if self.max_shard_bytes < 64 * 1024:
            raise ValueError("max shard size must be at least 64 KiB")
        if not math.isfinite(self.dpo_min_margin) or self.dpo_min_margin < 0:
            raise ValueError("dpo minimum margin must be a finite number >= 0")
        if self.run_filter.min_score is not None and not math.isfinite(self.run_filter.min_score):
            raise ValueError("minimum score must be a finite number")
        if self.dpo_max_pairs < 1:
            raise ValueError("dpo pairs per Run must be at least 1")


class Exporter:
    """Base of the formats; subclasses set the class attributes and ``features``/``rows``."""

    name: ClassVar[str]
    version: ClassVar[int] = 1  # bump when rows change for the same log: the fingerprint moves
    summary: ClassVar[str]  # "one row is …", for the dataset card
    task_categories: ClassVar[tuple[str, ...]] = ()
    batch_rows: ClassVar[int] = 256

    def __init__(self, store: Store, options: ExportOptions) -> None:
        self.store = store
        self.options = options
        self._programs: dict[str, Program] = {}

    def features(self) -> Features:
        raise NotImplementedError

    def training_columns(self) -> tuple[str, ...]:
        """The columns a trainer feeds a model: no held-out evidence may ever reach them."""
        return ()

    def settings(self) -> dict[str, Any]:
        """The options that change this format's rows (recorded in the fingerprint and card)."""
        return {}

    def rows(self, run: RunHistory) -> Iterator[Row]:
        raise NotImplementedError

    def finish(self) -> Iterator[Row]:
        return iter(())

    def program(self, digest: str) -> Program:
        """A Program from the blobs, cached for the Run at hand (``forget`` between Runs)."""
        program = self._programs.get(digest)
        if program is None:
            program = self._programs[digest] = self.store.blobs.get_program(digest)
        return program

    def forget(self) -> None:
        self._programs.clear()
