"""The driving family with the real highway-env environments: catalog entries, the
baselines beating a uniform-random policy, replayed Episodes identical (every random draw
of highway-env comes from the Episode's seed), the domain Feedback and conformance."""

from __future__ import annotations

import functools

import pytest

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.evaluation import Evaluator
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("driving")

TASKS = ("parking", "roundabout")


run = functools.partial(family_run, trace_steps=10_000)


@pytest.mark.parametrize("name", TASKS)
def test_conformance(name: str) -> None:
    # highway-env simulates 10 to 30 decisions a second: short replays.
    report = check_benchmark(load_benchmark(name), episodes=1, steps=30)
    assert report.ok, [c for c in report.checks if not c.ok]


def test_catalog_entries_and_profiles() -> None:
    for name in TASKS:
        entry = catalog_entry(load_benchmark(name))
        assert entry is not None and entry.family == "driving" and entry.suites == ("core16",)
        assert [p.difficulty for p in entry.profiles] == list(range(len(entry.profiles)))
        reference = entry.reference
        assert (
            reference is not None
            and reference.split == "assessment"
            and reference.baseline > reference.random
        )
    hurried = load_benchmark("parking", {"profile": "hurried"})
    assert hurried.spec.max_episode_steps == 100  # 20 s at 5 decisions a second
    assert catalog_entry(hurried).suites == ()  # type: ignore[union-attr]
    assert hurried.spec.environment_digest != load_benchmark("parking").spec.environment_digest
    assert load_benchmark("roundabout", {"profile": "long"}).spec.max_episode_steps == 30
    space = load_benchmark("parking").spec.observation_space
    assert space["type"] == "dict" and set(space["spaces"]) == {
        "observation",
        "achieved_goal",
        "desired_goal",
    }


def test_the_parking_baseline_parks_and_random_does_not(evaluator: Evaluator) -> None:
    ours = run(evaluator, "parking", baseline("parking"), 1)
    assert ours.feedback.content["terminations"] == {"parked": 1}
    for episode in ours.feedback.content["episodes"]:
        summary = episode["summary"]
        assert summary["parked"] is True and summary["collided"] is False
        assert summary["distance_to_goal"] < 5.0 and summary["mean_speed"] != 0
    assert ours.feedback.content["domain"]["parked_rate"] == 1.0
    random = run(evaluator, "parking", RANDOM_POLICY_DIR, 1)
    assert random.feedback.content["domain"]["parked_rate"] == 0.0
    assert ours.feedback.score > random.feedback.score
    for episode in random.feedback.content["episodes"]:
        assert episode["termination"] in {"collided", "truncated"}
        assert episode["summary"]["distance_to_goal"] > 5.0


def test_the_roundabout_baseline_collides_less_than_random(evaluator: Evaluator) -> None:
    ours = run(evaluator, "roundabout", baseline("roundabout"), 2)
    random = run(evaluator, "roundabout", RANDOM_POLICY_DIR, 2)
    assert ours.feedback.content["terminations"] == {"truncated": 2}
    assert ours.feedback.content["domain"]["collided_rate"] == 0.0
    assert ours.feedback.score > random.feedback.score
    for episode in ours.feedback.content["episodes"]:
        assert episode["length"] == 11 and set(episode["summary"]) == {
            "collided",
            "mean_speed",
            "on_road",
        }
        assert 0 < episode["summary"]["mean_speed"] <= 16.5


@pytest.mark.parametrize("name", TASKS)
def test_the_same_episode_twice_gives_identical_traces(evaluator: Evaluator, name: str) -> None:
    program = RANDOM_POLICY_DIR if name == "parking" else baseline(name)
    params = {"profile": "hurried"} if name == "parking" else {}
    first, second = (
        run(evaluator, name, program, 1, "validation", **params).records[0] for _ in range(2)
    )
    assert first.trace and first.steps > 5
    assert first.steps == second.steps and first.total_reward == second.total_reward
    assert first.summary == second.summary
    for a, b in zip(first.trace, second.trace, strict=True):
        assert (a.action, a.reward, a.terminated, a.truncated) == (
            b.action,
            b.reward,
            b.terminated,
            b.truncated,
        )
        assert repr(a.observation) == repr(b.observation)
