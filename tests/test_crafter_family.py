"""The Crafter family with the real game: conformance, the Crafter score (on hand-made records
and on played Episodes), the baseline beating a uniform-random policy, the observation, the
video frame, and Episodes identical across interpreters with different hash seeds and memory
layouts (Crafter as shipped is not)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from evopolicygym.benchmark import (
    RANDOM_POLICY_DIR,
    BenchmarkError,
    EpisodeRecord,
    EpisodeSpec,
    catalog_entry,
    check_benchmark,
)
from evopolicygym.evaluation import EvaluationResult, Evaluator
from evopolicygym.registry import load_benchmark
from tests.support.determinism import fingerprints
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("crafter", "crafter")

from crafter import constants  # noqa: E402

from evopolicygym_crafter.render import FRAME_SIZE, frame  # noqa: E402
from evopolicygym_crafter.scoring import crafter_score, success_rates  # noqa: E402
from evopolicygym_crafter.world import (  # noqa: E402
    ACHIEVEMENTS,
    ACTIONS,
    ENV_ID,
    SEMANTIC_IDS,
    Game,
    InsertionOrderedSet,
    OrderedWorld,
)

ENV = f"evopolicygym_crafter.world:{ENV_ID}"


def _make(length: int = 1000, observation: str = "semantic") -> gymnasium.Env[Any, Any]:
    return gymnasium.make(
        ENV, max_episode_steps=length, disable_env_checker=True, length=length,
        observation=observation,
    )  # fmt: skip


def _record(index: int, names: list[str], status: str = "ok", total: float = 0.0) -> EpisodeRecord:
    return EpisodeRecord(
        spec=EpisodeSpec(split="assessment", index=index, seed=index),
        policy_seed=1,
        status=status,  # type: ignore[arg-type]
        total_reward=total,
        steps=10,
        summary={"termination": "died", "achievements": names},
    )


@pytest.fixture(scope="module")
def played(evaluator: Evaluator) -> dict[str, EvaluationResult]:
    """The baseline and the random policy on the same two short assessment Episodes."""
    return {
        "baseline": family_run(evaluator, "crafter", baseline("crafter"), 2, profile="short"),
        "random": family_run(evaluator, "crafter", RANDOM_POLICY_DIR, 2, profile="short"),
    }


def test_conformance() -> None:
    report = check_benchmark(load_benchmark("crafter"))
    assert report.ok, [c for c in report.checks if not c.ok]


def test_the_score_is_the_crafter_score_over_the_episodes() -> None:
    benchmark = load_benchmark("crafter")
    assert benchmark.spec.primary_metric == "crafter_score"
    assert benchmark.spec.failure_score == -1.0
    records = [
        _record(0, ["collect_wood", "place_table"], total=1.5),
        _record(1, ["collect_wood"], total=0.1),
        # A failed Episode unlocks nothing, whatever its summary says.
        _record(2, ["collect_wood", "collect_diamond"], status="timeout", total=2.0),
    ]
    feedback = benchmark.score(records)
    rates = feedback.content["achievement_success_rates"]
    assert list(rates) == list(ACHIEVEMENTS) and len(rates) == 22
    assert rates["collect_wood"] == pytest.approx(200 / 3)
    assert rates["place_table"] == pytest.approx(100 / 3)
    assert rates["collect_diamond"] == 0.0
    expected = math.exp((math.log(1 + 200 / 3) + math.log(1 + 100 / 3)) / 22) - 1
    assert feedback.score == pytest.approx(expected) and feedback.score == pytest.approx(
        0.4223, abs=1e-4
    )
    assert feedback.content["crafter_score"] == feedback.score
    # Per Episode the return still counts, the failed one at the failure score.
    assert [e["return"] for e in feedback.content["episodes"]] == [1.5, 0.1, -1.0]
    assert feedback.content["mean_return"] == pytest.approx(0.6 / 3)
    assert feedback.content["mean_achievements"] == 1.0


def test_the_score_formula_at_its_bounds() -> None:
    assert crafter_score([0.0] * 22) == 0.0
    assert crafter_score([100.0] * 22) == pytest.approx(100.0)
    assert crafter_score([]) == 0.0
    # One achievement always, the rest never: the geometric mean weighs breadth.
    assert crafter_score([100.0] + [0.0] * 21) == pytest.approx(101 ** (1 / 22) - 1)
    assert success_rates([], ["a", "b"]) == {"a": 0.0, "b": 0.0}
    assert success_rates([["a"], ["a", "b"], []], ["a", "b"]) == pytest.approx(
        {"a": 200 / 3, "b": 100 / 3}
    )


def test_baseline_beats_random(played: dict[str, EvaluationResult]) -> None:
    ours, random = played["baseline"], played["random"]
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score + 20
    assert ours.feedback.content["mean_return"] > random.feedback.content["mean_return"] + 5
    reference = catalog_entry(load_benchmark("crafter")).reference  # type: ignore[union-attr]
    assert reference is not None and reference.split == "assessment" and reference.episodes == 32
    assert reference.baseline > reference.random
    assert load_benchmark("crafter").spec.metadata["reference_scores"]["baseline"] == (
        reference.baseline
    )


def test_feedback_lists_achievements_per_episode(played: dict[str, EvaluationResult]) -> None:
    content = played["baseline"].feedback.content
    assert set(content["terminations"]) <= {"died", "truncated"}
    for episode in content["episodes"]:
        summary = episode["summary"]
        names = summary["achievements"]
        assert names and set(names) <= set(ACHIEVEMENTS)
        assert summary["achievements_unlocked"] == len(names)
        assert summary["died"] is (episode["termination"] == "died")
        assert 0 < episode["length"] <= 1000
        if summary["died"]:
            # +1 per achievement, and health fell from 9 to 0.
            assert episode["return"] == pytest.approx(len(names) - 0.9)
    unlocked = [e["summary"]["achievements"] for e in content["episodes"]]
    rates = success_rates(unlocked, ACHIEVEMENTS)
    assert content["achievement_success_rates"] == pytest.approx(rates)
    assert played["baseline"].feedback.score == pytest.approx(crafter_score(list(rates.values())))
    assert content["domain"]["mean_achievements_unlocked"] == pytest.approx(
        sum(map(len, unlocked)) / len(unlocked)
    )


def test_spec_profiles_and_observation_modes() -> None:
    benchmark = load_benchmark("crafter")
    spec = benchmark.spec
    assert spec.max_episode_steps == 10_000 and spec.environment_parameters["length"] == 10_000
    assert spec.observation_space["spaces"]["view"]["shape"] == [7, 9]
    assert "image" not in spec.observation_space["spaces"]
    assert spec.action_space == {"type": "discrete", "n": 17, "start": 0}
    assert spec.metadata["actions"] == list(constants.actions) == list(ACTIONS)
    assert spec.metadata["semantic_ids"][:13] == ["none", *constants.materials]
    assert benchmark.frame is frame  # Episode videos draw what the player sees
    entry = catalog_entry(benchmark)
    assert entry is not None and entry.family == "crafter" and entry.suites == ("frontier",)
    assert [p.name for p in entry.profiles] == ["short", "standard"]
    short = load_benchmark("crafter", {"profile": "short"})
    assert short.spec.max_episode_steps == 1000
    assert catalog_entry(short).suites == ()  # type: ignore[union-attr]
    assert short.spec.environment_digest != spec.environment_digest
    both = load_benchmark("crafter", {"observation": "both"}).spec.observation_space["spaces"]
    assert both["image"]["shape"] == [64, 64, 3] and both["view"]["shape"] == [7, 9]
    image = load_benchmark("crafter", {"observation": "image"}).spec.observation_space
    assert "view" not in image["spaces"]
    with pytest.raises(BenchmarkError, match="observation"):
        load_benchmark("crafter", {"observation": "pixels"})
    with pytest.raises(BenchmarkError, match="profile"):
        load_benchmark("crafter", {"profile": "huge"})


def test_the_view_is_the_world_around_the_player() -> None:
    env = _make()
    observation, _ = env.reset(seed=11)
    game = env.unwrapped.game  # type: ignore[attr-defined]
    for _ in range(30):
        view = observation["view"]
        assert view.shape == (7, 9) and view.dtype == np.uint8 and view[3][4] == 13  # player
        semantic = game.semantic()
        x, y = (int(v) for v in game.player.pos)
        for row in range(7):
            for col in range(9):
                cx, cy = x + col - 4, y + row - 3
                inside = 0 <= cx < 64 and 0 <= cy < 64
                assert view[row][col] == (semantic[cx, cy] if inside else 0)
        assert observation["facing"] in (0, 1, 2, 3)
        assert set(observation["inventory"]) == set(constants.items) - {
            "health",
            "food",
            "drink",
            "energy",
        }
        observation, *_ = env.step(3)  # up, toward the world's edge eventually
    env.close()


def test_the_baseline_knows_crafters_rules() -> None:
    path = Path(baseline("crafter")) / "policy.py"
    spec = importlib.util.spec_from_file_location("crafter_rules", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert constants.place["table"]["uses"]["wood"] == module.TABLE_WOOD
    assert constants.place["furnace"]["uses"]["stone"] == module.FURNACE_STONE
    for name in ("water", "stone", "tree", "lava", "table", "furnace", "cow", "zombie", "plant"):
        assert getattr(module, name.upper()) == SEMANTIC_IDS.index(name)
    assert {n: ACTIONS.index(f"make_{n}") for n in module.MAKE} == module.MAKE
    assert ACTIONS.index("place_stone") == module.PLACE_STONE


def test_frames_and_images_never_change_the_episode() -> None:
    """Crafter draws its night noise from the world's random stream: rendering here saves and
    restores it, so a recorded or image-observing Episode is the one played without."""
    plain, drawn = _make(400), _make(400, observation="both")
    first, _ = plain.reset(seed=3)
    second, _ = drawn.reset(seed=3)
    assert second["image"].shape == (64, 64, 3) and (first["view"] == second["view"]).all()
    frames = []
    for t in range(400):  # through the first night
        action = (0, 5, 1, 2, 3, 4)[t % 6]
        a = plain.step(action)
        frames.append(frame(drawn))
        b = drawn.step(action)
        assert (a[0]["view"] == b[0]["view"]).all() and a[1:4] == b[1:4]
        if a[2]:
            break
    picture = frames[-1]
    assert picture.shape == (FRAME_SIZE, FRAME_SIZE, 3) and picture.dtype == np.uint8
    assert len({f.tobytes() for f in frames}) > 10 and picture.std() > 10
    plain.close()
    drawn.close()


def test_chunks_keep_insertion_order() -> None:
    class Hashed:
        def __init__(self, value: int) -> None:
            self.value = value

        def __hash__(self) -> int:
            return -self.value  # a set would iterate these in another order

    members = [Hashed(v) for v in (5, 1, 9, 3, 7)]
    ordered = InsertionOrderedSet(members)
    assert list(ordered) == members and len(ordered) == 5
    ordered.remove(members[2])
    ordered.add(members[2])
    assert list(ordered) == [*members[:2], *members[3:], members[2]]
    game = Game(length=100, images=False)
    game.reseed(1)
    game.reset()
    assert isinstance(game.world, OrderedWorld)
    assert all(isinstance(c, InsertionOrderedSet) for c in game.world.chunks.values())


def _fingerprints_twice(program: Path) -> list[list[dict[str, Any]]]:
    """One short Episode in two interpreters with different hash seeds and allocators (so
    different id() layouts)."""
    params = {"profile": "short"}
    return [
        fingerprints("crafter", program, params=params, episodes=1, hash_seed="1"),
        fingerprints(
            "crafter", program, params=params, episodes=1, hash_seed="2",
            env={"PYTHONMALLOC": "malloc"},
        ),
    ]  # fmt: skip


def test_episodes_are_identical_across_processes() -> None:
    """The baseline lives long enough for cows and zombies to come and go, which is where
    Crafter as shipped differs between processes (a random policy dies before)."""
    one, two = _fingerprints_twice(baseline("crafter"))
    assert one == two
    assert one[0]["status"] == "ok" and one[0]["steps"] > 150 and one[0]["return"] > 5
