"""The robotics family with the real gymnasium-robotics Fetch environments: catalog
entries and profiles, the scripted baselines beating a uniform-random policy, replayed
Episodes identical, the domain Feedback (success, final distance, block moved) and
conformance."""

from __future__ import annotations

import functools

import pytest

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.evaluation import Evaluator
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("robotics")

TASKS = ("fetch_push", "fetch_pickandplace")


run = functools.partial(family_run, trace_steps=10_000)


@pytest.mark.parametrize("name", TASKS)
def test_conformance(name: str) -> None:
    report = check_benchmark(load_benchmark(name))
    assert report.ok, [c for c in report.checks if not c.ok]


def test_catalog_entries_and_profiles() -> None:
    for name in TASKS:
        benchmark = load_benchmark(name)
        entry = catalog_entry(benchmark)
        assert entry is not None and entry.family == "robotics" and entry.suites == ("core16",)
        assert [p.name for p in entry.profiles] == [
            "long",
            "standard",
        ] and entry.profile == "standard"
        reference = entry.reference
        assert (
            reference is not None
            and reference.episodes == 32
            and reference.baseline > reference.random
        )
        assert benchmark.spec.max_episode_steps == 50 and benchmark.spec.failure_score == -51.0
        space = benchmark.spec.observation_space
        assert set(space["spaces"]) == {"observation", "achieved_goal", "desired_goal"}
        assert space["spaces"]["observation"]["shape"] == [25]
        long = load_benchmark(name, {"profile": "long"})
        assert long.spec.max_episode_steps == 100 and catalog_entry(long).suites == ()  # type: ignore[union-attr]
        assert long.spec.environment_digest != benchmark.spec.environment_digest


@pytest.mark.parametrize("name", TASKS)
def test_the_scripted_baseline_reaches_the_goal_and_random_does_not(
    evaluator: Evaluator, name: str
) -> None:
    ours = run(evaluator, name, baseline(name), 3)
    random = run(evaluator, name, RANDOM_POLICY_DIR, 3)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.content["terminations"] == {"reached_goal": 3}
    for episode in ours.feedback.content["episodes"]:
        summary = episode["summary"]
        assert summary["success"] is True and summary["object_moved"] is True
        assert summary["final_distance"] < 0.05
    assert ours.feedback.content["domain"]["success_rate"] == 1.0
    # Random now and then finds the goal where the block already was (1 of 32 measured).
    assert random.feedback.content["domain"]["success_rate"] < 1.0
    assert random.feedback.content["terminations"].get("truncated", 0) >= 1
    assert ours.feedback.score > random.feedback.score


@pytest.mark.parametrize("name", TASKS)
def test_the_same_episode_twice_gives_identical_traces(evaluator: Evaluator, name: str) -> None:
    first, second = (
        run(evaluator, name, baseline(name), 1, "validation").records[0] for _ in range(2)
    )
    assert first.trace and first.steps == 50
    assert first.total_reward == second.total_reward and first.summary == second.summary
    for a, b in zip(first.trace, second.trace, strict=True):
        assert (a.action, a.reward) == (b.action, b.reward)
        assert repr(a.observation) == repr(b.observation)
