"""The ``crafter`` Benchmark: Crafter's open-world survival game, scored as its paper scores it.

The policy sees, each step, a dict: ``view``, the 9 x 7 cells Crafter's image shows around
the player as semantic ids (a 7 x 9 uint8 tensor of rows, north first, the player at
``view[3][4]``; ``metadata.semantic_ids`` names each id), ``inventory`` (name -> count),
``health``, ``food``, ``drink``, ``energy`` (0 to 9), ``facing`` (0 left, 1 right, 2 up,
3 down: the direction of move action ``1 + facing``), ``sleeping`` (0 or 1) and ``daylight``
(0 night to 1 day). With ``observation=image`` it sees Crafter's own 64 x 64 RGB image
instead of ``view``, with ``both`` both. It answers one of Crafter's 17 actions by index
(``metadata.actions`` names them).

Scoring. An Episode's return is Crafter's reward summed: +1 for each step that unlocks an
achievement for the first time in the Episode, plus a tenth of each change in health, so it
lies between -0.9 (health telescopes from 9 to 0) and 22.9. The Evaluation's score
(``Feedback.score``, ``primary_metric`` ``crafter_score``) is not the mean return but the
Crafter score over its Episodes (``scoring``): from each achievement's success rate across
the Episodes, a geometric mean in percent. That is the number Crafter's papers report, and
it rewards breadth (unlocking the rare achievements) over repetition. A failed Episode
counts as unlocking nothing, the worst it can do, so failing never pays in the score.

Per Episode the kernel counts returns, floored at the failure score: -1 here, below any
return (-0.9 would leave no room for the rounding of the 0.1 steps of health) and below the
Crafter score, which is at least 0. The Crafter score is not a mean over Episodes, so
Submissions on the same Episodes compare exactly by it, while a reader that would compare
two Submissions on part of their Episodes through per-Episode scores finds the published
score is not their mean and does not compare them. Feedback also lists, per Episode, the
achievements unlocked and why it ended (``died`` or ``truncated``), and over the Episodes
each achievement's success rate (``achievement_success_rates``, percent).

Crafter as shipped is not deterministic across processes; ``world`` says why and how this
family makes it so without changing the game.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium

from evopolicygym.benchmark import (
    BenchmarkError,
    BenchmarkSpec,
    CatalogEntry,
    EpisodeEnd,
    EpisodeRecord,
    EpisodeTracker,
    Feedback,
    GymnasiumBenchmark,
    Profile,
    ReferenceScores,
    VideoOptions,
    pick_profile,
)
from evopolicygym_crafter.render import frame
from evopolicygym_crafter.scoring import crafter_score, success_rates
from evopolicygym_crafter.world import (
    ACHIEVEMENTS,
    ACTIONS,
    ENV_ID,
    ITEMS,
    OBSERVATIONS,
    SEMANTIC_IDS,
)

__all__ = [
    "BASELINES_DIR",
    "DEFAULT_PROFILE",
    "FAILURE_SCORE",
    "PRIMARY_METRIC",
    "PROFILES",
    "REFERENCE",
    "CrafterBenchmark",
    "CrafterTracker",
    "crafter",
    "unlocked_names",
]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
RULES = str(BASELINES_DIR / "rules")
PRIMARY_METRIC = "crafter_score"
FAILURE_SCORE = -1.0
ACHIEVEMENTS_KEY = "achievements"

PROFILES: tuple[Profile, ...] = (
    Profile(
        name="short",
        difficulty=0,
        parameters={"length": 1_000},
        description="1,000 steps: a day and a few nights, little time for the deep achievements",
    ),
    Profile(
        name="standard",
        difficulty=1,
        parameters={"length": 10_000},
        description="10,000 steps, Crafter's own Episode length",
    ),
)
DEFAULT_PROFILE = "standard"
DESCRIPTION = (
    "Survive in Crafter's open world and unlock its 22 achievements (collect, craft, place, "
    "eat, defeat), scored by the Crafter score over the Episodes."
)
# Measured with evaluate() on the standard profile: the assessment split, seed 0, 32
# Episodes, the rules baseline against the kernel's uniform-random program, as Crafter scores
# (percent). Mean returns: 17.57 +- 0.49 (standard error) against 1.76 +- 0.18; every Episode
# of both ended with the player dead, after 907 steps on average for the baseline and 177
# for random (Crafter's paper reports 1.6% and a return of 2.1 for random).
REFERENCE = ReferenceScores(
    baseline=69.5358, random=1.5977, split="assessment", seed=0, episodes=32
)

OBSERVATION_TEXT = (
    "{view: 7 x 9 uint8 semantic ids of the cells around the player, rows north first, "
    "columns west first, the player at view[3][4] (see semantic_ids; 0 outside the world); "
    "inventory: {item: count 0..9}; health, food, drink, energy: 0..9; facing: 0 left, "
    "1 right, 2 up, 3 down (move action 1 + facing goes that way); sleeping: 0 or 1; "
    "daylight: 0 (night) to 1 (day)}; with observation=image the 64 x 64 x 3 uint8 image "
    "Crafter shows replaces view, with observation=both the dict has both"
)
METADATA: dict[str, Any] = {
    "observation": OBSERVATION_TEXT,
    "action": ", ".join(f"{i} {name}" for i, name in enumerate(ACTIONS)),
    "actions": list(ACTIONS),
    "semantic_ids": list(SEMANTIC_IDS),
    "items": list(ITEMS),
    "achievements": list(ACHIEVEMENTS),
    "reward": (
        "+1 on each step unlocking an achievement for the first time in the Episode, plus a "
        "tenth of each change in health; the Episode ends when the player dies"
    ),
    "score": (
        "the Crafter score in percent: exp(mean over the 22 achievements of ln(1 + s)) - 1, "
        "s the percentage of Episodes unlocking it (a failed Episode unlocks nothing)"
    ),
}


def unlocked_names(record: EpisodeRecord) -> list[str]:
    """The achievements a completed Episode unlocked (none for a failed one)."""
    if record.status != "ok":
        return []
    names = record.summary.get(ACHIEVEMENTS_KEY)
    if not isinstance(names, list):
        return []
    return [name for name in names if isinstance(name, str)]


class CrafterTracker(EpisodeTracker):
    """Which achievements the Episode unlocked, and whether the player died."""

    def termination(self, end: EpisodeEnd) -> str:
        if end.terminated:
            return "died"
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        names = env.unwrapped.unlocked()  # type: ignore[attr-defined]
        return {
            ACHIEVEMENTS_KEY: names,
            "achievements_unlocked": len(names),
            "died": bool(end.terminated),
        }


class CrafterBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark whose score is the Crafter score (see the module docs)."""

    @property
    def spec(self) -> BenchmarkSpec:
        base = GymnasiumBenchmark.spec.fget(self)  # type: ignore[attr-defined]
        if base.primary_metric != PRIMARY_METRIC:
            fields = {name: getattr(base, name) for name in base.__struct_fields__}
            fields["primary_metric"] = PRIMARY_METRIC
            metadata = dict(base.metadata)
            metadata["episode_return"] = "undiscounted sum of Crafter's rewards"
            fields["metadata"] = metadata
            base = BenchmarkSpec(**fields)
            self._spec = base
        return base

    @spec.setter
    def spec(self, value: BenchmarkSpec) -> None:
        self._spec = value

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        base = super().score(records)
        unlocked = [unlocked_names(r) for r in records]
        rates = success_rates(unlocked, ACHIEVEMENTS)
        score = crafter_score(list(rates.values()))
        content = dict(base.content)
        content[PRIMARY_METRIC] = score
        content["achievement_success_rates"] = rates
        content["mean_achievements"] = (
            sum(len(names) for names in unlocked) / len(unlocked) if unlocked else 0.0
        )
        if not math.isfinite(score):
            raise BenchmarkError(f"crafter score is not finite: {score!r}")
        return Feedback(score=score, content=content, artifacts=base.artifacts)


def crafter(profile: str | None = None, observation: str = "semantic") -> CrafterBenchmark:
    """The ``crafter`` Benchmark with a profile (``short``, ``standard``) and an observation
    (``semantic``, ``image``, ``both``)."""
    if observation not in OBSERVATIONS:
        raise BenchmarkError(
            f"crafter: observation is one of {', '.join(OBSERVATIONS)}, not {observation!r}"
        )
    chosen = pick_profile("crafter", PROFILES, DEFAULT_PROFILE if profile is None else profile)
    length = int(chosen.parameters["length"])
    is_default = chosen.name == DEFAULT_PROFILE
    return CrafterBenchmark(
        f"evopolicygym_crafter.world:{ENV_ID}",
        benchmark_id="crafter",
        description=f"{DESCRIPTION} Profile {chosen.name}: {chosen.description}.",
        make_kwargs={"length": length, "observation": observation},
        max_episode_steps=length,
        failure_return=FAILURE_SCORE,
        success_threshold=None,
        metadata=METADATA,
        baseline=RULES,
        catalog=CatalogEntry(
            family="crafter",
            suites=("frontier",) if is_default and observation == "semantic" else (),
            profiles=PROFILES,
            profile=chosen.name,
            reference=REFERENCE if is_default and observation == "semantic" else None,
        ),
        tracker=CrafterTracker,
        frame=frame,
        # Each Submission's best and worst Episode as videos of what the player saw.
        video=VideoOptions(),
    )
