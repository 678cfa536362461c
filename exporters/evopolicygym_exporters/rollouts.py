"""``rollouts``: one row per recorded policy Episode, for offline RL and behaviour cloning.

Only train Episodes of Submissions are recorded (``record_trajectories``), so
no Validation or Assessment Episode is ever here. ``observations`` has one
more entry than ``actions``: the first is the observation from reset (null in
traces recorded before it was kept), then the one after each action. Values
of any space are JSON (arrays as nested lists). ``complete`` is false when the
Episode ran longer than its recorded trace. Identical Episodes (the same
observations, actions and rewards, whichever program and Run) share a split.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from datasets import Features, Json, List, Value

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.traces import decode_trace
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.history import RunHistory

__all__ = ["RolloutsExporter"]

log = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    """Bytes (a tensor's buffer) as hex, so every value is JSON."""
    if isinstance(value, bytes | bytearray):
        return {"hex": bytes(value).hex()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class RolloutsExporter(Exporter):
    name: ClassVar[str] = "rollouts"
    summary: ClassVar[str] = (
        "one recorded policy Episode: observations, actions, rewards, terminations, truncations"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("reinforcement-learning", "robotics")
    batch_rows: ClassVar[int] = 64
    redacts: ClassVar[bool] = False  # environment data, no recorded text

    def training_columns(self) -> tuple[str, ...]:
        return ("observations", "actions", "rewards")

    def features(self) -> Features:
        return Features(
            {
                "run_id": Value("string"),
                "benchmark_id": Value("string"),
                "environment_digest": Value("string"),
                "submission_id": Value("int32"),
                "program_digest": Value("string"),
                "pool_index": Value("int32"),
                "status": Value("string"),
                "failure": Value("string"),
                "total_reward": Value("float64"),
                "steps": Value("int64"),
                "complete": Value("bool"),
                "observations": List(Json()),
                "actions": List(Json()),
                "rewards": List(Value("float64")),
                "terminations": List(Value("bool")),
                "truncations": List(Value("bool")),
            }
        )

    def rows(self, run: RunHistory) -> Iterator[Row]:
        group = self.group(run)
        for submission in run.submissions:
            for episode in submission.episodes:
                if episode.trace_blob is None:
                    continue
                try:
                    data = self.store.blobs.get(episode.trace_blob)
                    trace = decode_trace(data)
                except (BlobError, ValueError) as exc:
                    log.warning("run %s: skipped a trace: %s", run.run_id, exc)
                    continue
                steps = trace.steps
                truncations = [s[3] for s in steps]
                if steps and len(steps) == episode.steps and not (steps[-1][2] or steps[-1][3]):
                    # Ended without a terminal flag: by the step limit (traces written before
                    # it was flagged) or by a policy failure; either way a truncation.
                    truncations[-1] = True
                row = {
                    "run_id": run.run_id,
                    "benchmark_id": run.created.benchmark_id,
                    "environment_digest": run.created.environment_digest,
                    "submission_id": submission.submission_id,
                    "program_digest": submission.program_digest,
                    "pool_index": episode.index,
                    "status": episode.status,
                    "failure": episode.failure,
                    "total_reward": episode.total_reward,
                    "steps": episode.steps,
                    "complete": len(steps) == episode.steps,
                    "observations": [_plain(trace.initial_observation)]
                    + [_plain(s[4]) for s in steps],
                    "actions": [_plain(s[0]) for s in steps],
                    "rewards": [s[1] for s in steps],
                    "terminations": [s[2] for s in steps],
                    "truncations": truncations,
                }
                yield group, row
