"""The MiniGrid family with the real environments: conformance, the baseline beating a
uniform-random policy on the assessment split, deterministic Episodes, the domain Feedback
(goal reached, steps to key and door, why an Episode ended), profiles, and an offline Run."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("minigrid")

TASKS = (
    "minigrid_doorkey",
    "minigrid_keycorridor",
    "minigrid_fourrooms",
    "minigrid_obstructedmaze",
)


run = functools.partial(family_run, trace_steps=200)  # EvaluationConfig's default


@pytest.mark.parametrize("name", TASKS)
def test_conformance(name: str) -> None:
    report = check_benchmark(load_benchmark(name))
    assert report.ok, [c for c in report.checks if not c.ok]


@pytest.mark.parametrize("name", TASKS)
def test_baseline_beats_random_on_the_assessment_split(evaluator: Evaluator, name: str) -> None:
    ours = run(evaluator, name, baseline(name), 3)
    random = run(evaluator, name, RANDOM_POLICY_DIR, 3)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score
    # What is recorded in the catalog was measured the same way, on more Episodes.
    reference = catalog_entry(load_benchmark(name)).reference  # type: ignore[union-attr]
    assert reference is not None and reference.split == "assessment" and reference.episodes == 32
    assert reference.baseline > reference.random
    assert load_benchmark(name).spec.metadata["reference_scores"]["baseline"] == reference.baseline


def test_doorkey_feedback_counts_steps_to_key_and_door(evaluator: Evaluator) -> None:
    result = run(evaluator, "minigrid_doorkey", baseline("minigrid_doorkey"), 2, profile="8x8")
    content = result.feedback.content
    assert content["terminations"] == {"reached_goal": 2}
    for episode in content["episodes"]:
        summary = episode["summary"]
        assert episode["termination"] == "reached_goal"
        assert summary["goal_reached"] is True and summary["final_distance"] == 0
        assert summary["key_picked"] is True and summary["door_unlocked"] is True
        assert 0 < summary["steps_to_key"] < summary["steps_to_door"] < episode["length"]
        assert summary["doors_opened"] == 1
    assert content["domain"]["goal_reached_rate"] == 1.0
    assert content["domain"]["mean_steps_to_key"] == pytest.approx(
        sum(e["summary"]["steps_to_key"] for e in content["episodes"]) / 2
    )
    # Success pays 1 - 0.9 * steps / limit: the returns say how fast.
    limit = load_benchmark("minigrid_doorkey", {"profile": "8x8"}).spec.max_episode_steps
    for episode in content["episodes"]:
        assert episode["return"] == pytest.approx(1 - 0.9 * episode["length"] / limit, abs=1e-6)
    (trace,) = result.feedback.artifacts
    assert trace.name == "trace.jsonl" and 0 < len(trace.data) <= 256 * 1024


def test_random_times_out_and_fourrooms_has_no_key_fields(evaluator: Evaluator) -> None:
    lost = run(evaluator, "minigrid_keycorridor", RANDOM_POLICY_DIR, 1, profile="S3R3")
    (episode,) = lost.feedback.content["episodes"]
    assert episode["termination"] == "truncated" and episode["truncated"] is True
    assert episode["summary"]["goal_reached"] is False and episode["return"] == 0.0
    assert (
        episode["summary"]["door_unlocked"] is False and episode["summary"]["steps_to_door"] is None
    )
    rooms = run(evaluator, "minigrid_fourrooms", baseline("minigrid_fourrooms"), 1)
    (summary,) = [e["summary"] for e in rooms.feedback.content["episodes"]]
    assert set(summary) == {"goal_reached", "final_distance"}


def test_the_same_episode_twice_gives_identical_traces(evaluator: Evaluator) -> None:
    name = "minigrid_obstructedmaze"
    benchmark = load_benchmark(name)
    program = Program.from_directory(baseline(name))
    config = EvaluationConfig(split="validation", episodes=1, seed=3, jobs=1, trace_steps=10_000)
    first, second = (evaluator.evaluate(program, benchmark, config).records[0] for _ in range(2))
    assert first.trace and first.steps > 10
    assert first.steps == second.steps and first.total_reward == second.total_reward
    assert first.summary == second.summary
    for a, b in zip(first.trace, second.trace, strict=True):
        assert (a.action, a.reward, a.terminated, a.truncated) == (
            b.action,
            b.reward,
            b.terminated,
            b.truncated,
        )
        assert (a.observation["image"] == b.observation["image"]).all()


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("minigrid_keycorridor", "S3R1"),
        ("minigrid_doorkey", "5x5"),
        ("minigrid_obstructedmaze", "Full"),
    ],
)
def test_the_baseline_solves_the_smallest_and_the_largest_profiles(
    evaluator: Evaluator, name: str, profile: str
) -> None:
    """One-cell rooms leave nowhere harmless to put a key down; the full maze has eight
    blocked doors and keys in boxes."""
    result = run(evaluator, name, baseline(name), 2, profile=profile)
    assert result.feedback.content["terminations"] == {"reached_goal": 2}


@pytest.mark.parametrize("name", ["minigrid_doorkey", "minigrid_obstructedmaze"])
def test_the_baseline_plays_the_partial_view_too(evaluator: Evaluator, name: str) -> None:
    """With view=partial the policy sees MiniGrid's own 7x7 view; the baseline maps what it
    sees and explores, and still completes the mission."""
    partial = load_benchmark(name, {"view": "partial"})
    assert partial.spec.observation_space["spaces"]["image"]["shape"] == [7, 7, 3]
    assert partial.spec.environment_parameters["view"] == "partial"
    assert partial.spec.environment_digest != load_benchmark(name).spec.environment_digest
    result = run(evaluator, name, baseline(name), 2, view="partial")
    assert result.feedback.content["terminations"] == {"reached_goal": 2}
    reference = catalog_entry(partial).reference  # type: ignore[union-attr]
    assert reference is not None and reference.baseline > reference.random


def test_profiles_order_difficulty_and_pick_environments() -> None:
    for name in TASKS:
        entry = catalog_entry(load_benchmark(name))
        assert entry is not None and entry.family == "minigrid" and entry.suites == ("core16",)
        assert [p.difficulty for p in entry.profiles] == list(range(len(entry.profiles)))
    corridor = load_benchmark("minigrid_keycorridor", {"profile": "S3R1"})
    assert corridor.spec.metadata["env_id"] == "MiniGrid-KeyCorridorS3R1-v0"
    assert corridor.spec.observation_space["spaces"]["image"]["shape"] == [
        7,
        3,
        3,
    ]  # 7 wide, 3 high
    long = load_benchmark("minigrid_fourrooms", {"profile": "long"})
    assert (
        long.spec.max_episode_steps == 400 and long.spec.environment_parameters["max_steps"] == 400
    )


def test_run_on_doorkey_with_the_reference_agent_finishes_offline(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [
            sys.executable, "-c", "from evopolicygym.cli import main; main()",
            "run", "--benchmark", "minigrid_doorkey", "--agent", "reference", "--budget", "32",
            "--store", str(store), "--json",
        ],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_PROXY": "*", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"status": "finished"' in done.stdout
    assert '"benchmark_id": "minigrid_doorkey"' in done.stdout
