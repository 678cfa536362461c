"""A GymnasiumBenchmark's Feedback: per-Episode rows, why each Episode ended, the family's
domain summary and a bounded trace."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from evopolicygym.benchmark.contract import SUMMARY_TERMINATION, EpisodeRecord, Feedback
from evopolicygym.benchmark.gymnasium_adapter.traces import trace_artifact

__all__ = ["domain_summary", "feedback", "termination_of"]

OUTPUT_CHARS = 2000
FAILURE_CHARS = 500


def feedback(
    records: Sequence[EpisodeRecord],
    returns: Sequence[float],
    *,
    failure_return: float | None,
    success_threshold: float | None,
    deterministic: bool,
) -> Feedback:
    """The Feedback on ``records``, each scored as ``returns`` says: per-Episode rows, return
    statistics, failure and termination counts, the domain summary and the trace."""
    below = sum(
        1
        for r in records
        if r.status == "ok" and failure_return is not None and r.total_reward < failure_return
    )
    failures: dict[str, int] = {}
    terminations: dict[str, int] = {}
    episodes = []
    for record, ret in zip(records, returns, strict=True):
        if record.status != "ok":
            failures[record.status] = failures.get(record.status, 0) + 1
        failure = record.failure
        cause = termination_of(record)
        terminations[cause] = terminations.get(cause, 0) + 1
        episode: dict[str, Any] = {
            "index": record.spec.index,
            "status": record.status,
            "return": ret,
            "length": record.steps,
            "terminated": record.terminated,
            "truncated": record.truncated,
            "termination": cause,
            "failure": None if failure is None else failure[:FAILURE_CHARS],
            # The end of what the policy printed: its author's own debugging channel.
            "output_tail": record.stderr_tail[-OUTPUT_CHARS:],
        }
        fields = _domain_fields(record)
        if fields:
            episode["summary"] = fields
        episodes.append(episode)
    mean = statistics.fmean(returns) if returns else 0.0
    content: dict[str, Any] = {
        "episodes": episodes,
        "mean_return": mean,
        "std_return": statistics.pstdev(returns) if returns else 0.0,
        "min_return": min(returns) if returns else 0.0,
        "max_return": max(returns) if returns else 0.0,
        "mean_length": statistics.fmean(r.steps for r in records) if records else 0.0,
        "failures": failures,
        "terminations": dict(sorted(terminations.items())),
        "failure_score": failure_return,
        # Completed Episodes whose return fell under the failure score (scored at it).
        "below_failure_score": below,
    }
    domain = domain_summary(records)
    if domain:
        content["domain"] = domain
    if success_threshold is not None:
        hits = sum(1 for r in returns if r >= success_threshold)
        content["success_rate"] = hits / len(returns) if returns else 0.0
    if not deterministic:
        content["deterministic"] = False  # replaying an Episode need not give the same return
    trace = trace_artifact(records)
    return Feedback(score=mean, content=content, artifacts=(trace,) if trace else ())


def termination_of(record: EpisodeRecord) -> str:
    """Why an Episode ended: ``policy_<status>`` when the policy failed, else what its
    Environment's summary says, else ``truncated`` / ``terminated``."""
    if record.status != "ok":
        return f"policy_{record.status}"
    cause = record.summary.get(SUMMARY_TERMINATION)
    if isinstance(cause, str) and cause:
        return cause
    if record.truncated:
        return "truncated"
    return "terminated" if record.terminated else "stopped"


def _domain_fields(record: EpisodeRecord) -> dict[str, Any]:
    return {k: v for k, v in record.summary.items() if k != SUMMARY_TERMINATION}


def domain_summary(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """The family's per-Episode fields over the completed Episodes: ``<field>_rate`` for a
    bool (the share of Episodes where it holds), ``mean_<field>`` for a number (over the
    Episodes where it is not None). Other values are left to the per-Episode rows."""
    flags: dict[str, list[bool]] = {}
    numbers: dict[str, list[float]] = {}
    for record in records:
        if record.status != "ok":
            continue
        for key, value in _domain_fields(record).items():
            if type(value) is bool:
                flags.setdefault(key, []).append(value)
            elif type(value) in (int, float) and math.isfinite(value):
                numbers.setdefault(key, []).append(float(value))
    out: dict[str, float] = {}
    for key, seen in sorted(flags.items()):
        out[f"{key}_rate"] = sum(seen) / len(seen)
    for key, values in sorted(numbers.items()):
        out[f"mean_{key}"] = statistics.fmean(values)
    return out
