"""The Run read API: what happened in a Run, folded once from its stream.

- Stream ids: one stream per Run, ``run-<id>`` (``run_stream_id``, ``run_id_of``).
- ``better(a, b, direction)``: whether score ``a`` beats ``b`` in a Benchmark's direction,
  the one comparison every reader uses.
"""

from __future__ import annotations

import math

__all__ = [
    "RUN_PREFIX",
    "better",
    "run_id_of",
    "run_stream_id",
]

RUN_PREFIX = "run-"


def run_stream_id(run_id: str) -> str:
    """The stream of the Run ``run_id``."""
    return RUN_PREFIX + run_id


def run_id_of(stream_id: str) -> str | None:
    """The Run id of a Run stream, None for any other stream."""
    return stream_id[len(RUN_PREFIX) :] if stream_id.startswith(RUN_PREFIX) else None


def better(a: float | None, b: float | None, direction: str) -> bool:
    """Whether score ``a`` strictly beats ``b`` in ``direction`` (``maximize`` or
    ``minimize``). Any score beats none; NaN and None never beat anything; equal scores
    do not beat each other, so the earlier of equals is kept."""
    if a is None or math.isnan(a):
        return False
    if b is None or math.isnan(b):
        return True
    return a < b if direction == "minimize" else a > b
