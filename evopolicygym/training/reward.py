"""The training reward of one rollout: its Run's held-out result, normalized per task.

``normalized_reward`` is the rule, a pure function: the Assessment score ``A`` of the
selected Program against the initial program's ``I`` and a uniform-random policy's ``R`` on
the same Assessment Episodes, ``clip((A - I) / max(|I - R|, eps), -1, 1)`` in the
Benchmark's direction. 0 is "as good as the program it started from", 1 "better by at
least the distance from random to the start", -1 the reverse, and a rollout that handed
nothing off. The scale makes tasks with scores of any size comparable inside one batch.

``ReferenceScores`` measures ``I`` and ``R`` once per Benchmark, initial program and
Assessment Episodes, in the Host's engine under the Run's limits, and keeps them: every
generation of a GRPO group shares them.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from evopolicygym.benchmark import RANDOM_POLICY_DIR, Benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider import RunState
from evopolicygym.run.pool import planned_split

__all__ = ["EPSILON", "NO_HANDOFF", "ReferenceScores", "normalized_reward", "run_reward"]

EPSILON = 1e-9  # the smallest distance from random to the start a reward divides by
NO_HANDOFF = -1.0  # the reward of a rollout whose Agent handed nothing off
HOST_FAULTS = frozenset(
    {"evaluation_failed", "validation_failed", "assessment_failed", "interrupted"}
)


def normalized_reward(
    assessed: float, initial: float, random: float, direction: str, eps: float = EPSILON
) -> float:
    """``clip((A - I) / max(|I - R|, eps), -1, 1)``, signed so that better is positive."""
    gain = assessed - initial if direction != "minimize" else initial - assessed
    return max(-1.0, min(1.0, gain / max(abs(initial - random), eps)))


@dataclass(frozen=True)
class Reference:
    initial: float
    random: float


class ReferenceScores:
    """``I`` and ``R`` per (Benchmark, initial program, Assessment Episodes), measured once."""

    def __init__(self) -> None:
        self._known: dict[tuple[object, ...], Reference] = {}
        self._lock = threading.Lock()

    def of(
        self,
        evaluator: Evaluator,
        benchmark: Benchmark,
        program: Program,
        config: RunConfig,
        seed: int,
    ) -> Reference:
        assessment = config.assessment
        key = (
            benchmark.spec.id,
            benchmark.spec.environment_digest,
            program.digest,
            assessment.split,
            seed,
            assessment.episodes,
            config.episode_timeout,
        )
        with self._lock:
            known = self._known.get(key)
        if known is not None:
            return known
        episodes = planned_split(benchmark, assessment.split, seed, assessment.episodes)
        evaluation = EvaluationConfig(
            split=assessment.split,
            episodes=assessment.episodes,
            jobs=config.jobs,
            episode_timeout=config.episode_timeout,
            trace_steps=0,
        )
        scores = [
            float(
                evaluator.evaluate(subject, benchmark, evaluation, episodes=episodes).feedback.score
            )
            for subject in (program, Program.from_directory(RANDOM_POLICY_DIR))
        ]
        reference = Reference(initial=scores[0], random=scores[1])
        with self._lock:
            self._known[key] = reference
        return reference


def run_reward(state: RunState, reference: Reference | None) -> float:
    """A finished Run's reward: ``NO_HANDOFF`` without the Agent's handoff, NaN where the Host
    failed (TRL leaves NaN rewards out), else the normalized Assessment score."""
    if state.handoff != "agent" or state.finish_candidates is None:
        return NO_HANDOFF
    if state.assessment_score is None or reference is None or state.finished in HOST_FAULTS:
        return math.nan
    return normalized_reward(
        state.assessment_score, reference.initial, reference.random, state.score_direction
    )
