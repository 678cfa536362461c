"""How candidates are ordered and, when the Agent named none, nominated.

The one ranking the Run uses: score in the Benchmark's direction, then fewer policy
failures, then the order given (finish order).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from evopolicygym.records.runs import better
from evopolicygym.run.decider.state import RunState

__all__ = ["nominated", "rank_candidates"]


def rank_candidates(results: Iterable[tuple[int, float, int]], direction: str) -> list[int]:
    """Submission ids best first: score in the Benchmark's direction (``better``, the one
    comparison of scores), then fewer failures, then the order given (finish order)."""

    def first(a: tuple[int, tuple[int, float, int]], b: tuple[int, tuple[int, float, int]]) -> int:
        (order_a, (_, score_a, failures_a)), (order_b, (_, score_b, failures_b)) = a, b
        if better(score_a, score_b, direction):
            return -1
        if better(score_b, score_a, direction):
            return 1
        return (failures_a - failures_b) or (order_a - order_b)

    ordered = sorted(enumerate(results), key=functools.cmp_to_key(first))
    return [result[0] for _, result in ordered]


def nominated(state: RunState) -> tuple[int, ...]:
    """The candidates: the Agent's (its accepted finish); when it never finished, none,
    unless the Run asked the Host to nominate its best published by train score (rules 1
    always did)."""
    if state.finish_candidates is not None:
        return state.finish_candidates
    if not (state.cfg.legacy or state.cfg.host_nomination):
        return ()
    published = [
        (s.id, s.score or 0.0, s.failures or 0)
        for s in state.submissions
        if s.status == "published"
    ]
    return tuple(
        rank_candidates(published, state.score_direction)[: state.cfg.validation.max_candidates]
    )
