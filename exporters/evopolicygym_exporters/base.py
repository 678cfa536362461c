"""What every exporter is: a named, versioned row builder over Run histories.

An exporter declares its ``datasets.Features`` up front and turns each
``RunHistory`` into rows, each with its group: the key its split follows
(``group(run)``: the Run's task, or the Run with ``split_by="run"``; a task id for
per-task rows), so rows of one group never straddle splits. ``identity(row)`` names
what makes two rows the same (the same program, pair or conversation): identical rows
never straddle splits either, whatever their groups. Exporters that aggregate over
Runs (``rl``) emit their rows from ``finish``. ``training_columns()`` names the
columns a trainer feeds a model; held-out evidence and Host-private values must never
reach them. ``finalize(row)`` passes every text of a row through the redactor (program
text, diffs and tool arguments as transcripts) and sets its ``redacted`` column.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec
from datasets import Features

from evopolicygym.program import Program
from evopolicygym.records.location import Store
from evopolicygym.redaction import REDACTED, Redactor
from evopolicygym_exporters.history import RunFilter, RunHistory
from evopolicygym_exporters.tasks import task_id

__all__ = ["DEFAULT_SHARD_BYTES", "REDACTOR", "SPLIT_BY", "ExportOptions", "Exporter", "Row"]

DEFAULT_SHARD_BYTES = 256 * 1024 * 1024
SPLIT_BY = ("task", "run")  # what a split groups rows by

Row = tuple[str, dict[str, Any]]  # (group: the key its split follows, row)

# The agents' redactor with no literal values (a Run's credentials are known to the Host
# only while it runs): secrets by their shapes.
REDACTOR = Redactor()
_JSON = msgspec.json.Encoder(order="sorted")
_KEPT_PROGRAM_BYTES = 32 * 1024 * 1024  # programs an exporter keeps from one Run to the next


@dataclass(frozen=True)
class ExportOptions:
    run_filter: RunFilter = field(default_factory=RunFilter)
    test_fraction: float = 0.1
    max_shard_bytes: int = DEFAULT_SHARD_BYTES
    success_only: bool = (
        False  # sft, distill: only successful Runs (finished, Agent handoff, improved)
    )
    per_turn: bool = False  # sft, distill: prompt/completion rows ending at each assistant turn
    teacher: tuple[str, ...] = ()  # distill: agent names, providers or models to keep
    dpo_min_margin: float = 0.0  # dpo: the least score difference of a pair (always > 0)
    dpo_max_pairs: int = 64  # dpo: pairs per Run, widest margins first
    license: str = "other"
    split_by: str = "task"  # task: a task's rows share a split; run: a Run's rows do

    def __post_init__(self) -> None:
        if self.split_by not in SPLIT_BY:
            raise ValueError(
                f"split by must be one of {', '.join(SPLIT_BY)}, not {self.split_by!r}"
            )
        if not 0.0 <= self.test_fraction < 1.0:
            raise ValueError("test fraction must be in [0, 1)")
        if self.max_shard_bytes < 64 * 1024:
            raise ValueError("max shard size must be at least 64 KiB")
        if not math.isfinite(self.dpo_min_margin) or self.dpo_min_margin < 0:
            raise ValueError("dpo minimum margin must be a finite number >= 0")
        if self.run_filter.min_score is not None and not math.isfinite(self.run_filter.min_score):
            raise ValueError("minimum score must be a finite number")
        steps = self.run_filter.trainer_step
        if steps is not None and (
            any(step is not None and step < 0 for step in steps)
            or (steps[0] is not None and steps[1] is not None and steps[0] >= steps[1])
        ):
            raise ValueError(
                "trainer steps must be a range FIRST:STOP of steps >= 0 with FIRST < STOP"
            )
        if self.dpo_max_pairs < 1:
            raise ValueError("dpo pairs per Run must be at least 1")


class Exporter:
    """Base of the formats; subclasses set the class attributes and ``features``/``rows``."""

    name: ClassVar[str]
    # Bump when rows change for the same log: the fingerprint moves. 2: labels, lineage,
    # redaction and splits grouped by task with identical rows joined.
    version: ClassVar[int] = 2
    summary: ClassVar[str]  # "one row is …", for the dataset card
    task_categories: ClassVar[tuple[str, ...]] = ()
    batch_rows: ClassVar[int] = 256
    # Rows pass the redactor, and a ``redacted`` column (if the features have one) says
    # whether one holds a redaction. Off for rows that hold no recorded text (rollouts).
    redacts: ClassVar[bool] = True

    def __init__(self, store: Store, options: ExportOptions) -> None:
        self.store = store
        self.options = options
        self._programs: dict[str, Program] = {}
        # Programs already read for earlier Runs, up to _KEPT_PROGRAM_BYTES of files: Runs
        # of one task share their initial program and often their Submissions' programs.
        # A Program is immutable and addressed by its digest, so these are the same Program.
        self._kept: dict[str, Program] = {}
        self._kept_bytes = 0
        self._seen: dict[int, tuple[Any, Any, bool]] = {}  # dicts redacted for the Run at hand

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

    def group(self, run: RunHistory) -> str:
        """The key a Run's rows split by: its task (``task_id``), or itself with
        ``split_by="run"``."""
        return task_id(run) if self.options.split_by == "task" else run.run_id

    def identity(self, row: dict[str, Any]) -> str | None:
        """What makes two rows of this config the same, so they never straddle splits: by
        default a digest of the training columns (None: every row is its own)."""
        columns = self.training_columns()
        if not columns:
            return None
        return "sha256:" + hashlib.sha256(_JSON.encode({c: row[c] for c in columns})).hexdigest()

    def finalize(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with every text passed through the redactor, and ``redacted`` set: true
        when a secret was replaced here or the row holds text redacted when it was recorded."""
        if not self.redacts:
            return row
        found = [False]
        for column, value in row.items():
            row[column] = self._redacted(value, found)
        if "redacted" in self.feature_names:
            row["redacted"] = found[0]
        return row

    def _redacted(self, value: Any, found: list[bool]) -> Any:
        """``REDACTOR.value(value)``, walking only the values whose text (JSON for a dict,
        each item for a list) could hold a secret, and each dict once per Run (per-turn
        rows share their prompt's messages); ``found[0]`` is set when one holds a redaction."""
        if isinstance(value, list):
            items = [self._redacted(item, found) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if not isinstance(value, str | dict):
            return value
        seen = self._seen.get(id(value)) if isinstance(value, dict) else None
        if seen is not None and seen[0] is value:
            new, held = seen[1], seen[2]
        else:
            text = value if isinstance(value, str) else _JSON.encode(value).decode()
            new = REDACTOR.value(value) if REDACTOR.may_replace(text) else value
            held = new is not value or REDACTED in text  # replaced now, or when recorded
            if isinstance(value, dict):
                self._seen[id(value)] = (value, new, held)  # keeps value alive: its id is its own
        found[0] = found[0] or held
        return new

    @property
    def feature_names(self) -> frozenset[str]:
        names = self.__dict__.get("_feature_names")
        if names is None:
            names = self.__dict__["_feature_names"] = frozenset(self.features())
        return names

    def finish(self) -> Iterator[Row]:
        return iter(())

    def program(self, digest: str) -> Program:
        """A Program from the blobs, cached for the Run at hand (``forget`` between Runs)
        and, up to a size, for the Runs after it."""
        program = self._programs.get(digest)
        if program is None:
            program = self._kept.get(digest)
            if program is None:
                program = self.store.blobs.get_program(digest)
                size = sum(len(data) for _, data in program.files)
                if self._kept_bytes + size > _KEPT_PROGRAM_BYTES:
                    self._kept.clear()
                    self._kept_bytes = 0
                self._kept[digest] = program
                self._kept_bytes += size
            self._programs[digest] = program
        return program

    def forget(self) -> None:
        """Drop what is cached for the Run at hand (its programs, its redacted values)."""
        self._programs.clear()
        self._seen.clear()
