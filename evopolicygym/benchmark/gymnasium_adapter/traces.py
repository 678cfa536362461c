"""The trace artifact of a Gymnasium Benchmark's Feedback: the first steps of the first
traced Episodes as JSON lines, bounded in size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from evopolicygym.benchmark.contract import Artifact, EpisodeRecord
from evopolicygym.policy import TensorValue
from evopolicygym.values import tensor_to_array

__all__ = ["trace_artifact"]

TRACE_EPISODES = 3
TRACE_STEPS = 200
TRACE_BYTES = 256 * 1024
# Larger arrays are summarised in traces; a full image frame per step would crowd out the rest.
TRACE_ARRAY_ITEMS = 1024


def _trace_default(value: Any) -> Any:
    if isinstance(value, TensorValue):
        value = tensor_to_array(value, writable=False)
    if isinstance(value, np.ndarray):
        if value.size > TRACE_ARRAY_ITEMS:
            return {"dtype": value.dtype.name, "shape": list(value.shape), "omitted": True}
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)


_TRACE_ENCODER = msgspec.json.Encoder(enc_hook=_trace_default)


def trace_artifact(records: Sequence[EpisodeRecord]) -> Artifact | None:
    """The first steps of the first traced Episodes as JSON lines, bounded in size."""
    lines: list[bytes] = []
    size = 0
    traced = [r for r in records if r.trace][:TRACE_EPISODES]
    for record in traced:
        assert record.trace is not None
        for t, step in enumerate(record.trace[:TRACE_STEPS]):
            line = _TRACE_ENCODER.encode(
                {
                    "episode": record.spec.index,
                    "t": t,
                    "action": step.action,
                    "reward": step.reward,
                    "observation": step.observation,
                }
            )
            if size + len(line) + 1 > TRACE_BYTES:
                break
            lines.append(line)
            size += len(line) + 1
    if not lines:
        return None
    return Artifact(
        name="trace.jsonl",
        media_type="application/jsonl",
        data=b"\n".join(lines) + b"\n",
        retention="bulk",
    )
