"""The MuJoCo family with the real environments: conformance, the baselines beating a
uniform-random policy on the assessment split, deterministic Episodes, the domain Feedback
(final distance to the target or goal, distance travelled, forward velocity, whether the Ant
fell, why an Episode ended), profiles, and gymnasium:<id> MuJoCo ids through the extra."""

from __future__ import annotations

import pytest

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("mujoco")

TASKS = ("reacher5", "halfcheetah5", "ant5", "pusher5")


run = family_run


@pytest.mark.parametrize("name", ["reacher5", "pusher5"])
def test_conformance(name: str) -> None:
    """The two short tasks in full; the 1000-step ones are checked by benchmarks check."""
    report = check_benchmark(load_benchmark(name))
    assert report.ok, [c for c in report.checks if not c.ok]


@pytest.mark.parametrize("name", ["reacher5", "pusher5"])
def test_baseline_beats_random_on_the_assessment_split(evaluator: Evaluator, name: str) -> None:
    ours = run(evaluator, name, baseline(name), 2)
    random = run(evaluator, name, RANDOM_POLICY_DIR, 2)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score


@pytest.mark.parametrize("name", TASKS)
def test_references_are_recorded_and_above_the_failure_score(name: str) -> None:
    benchmark = load_benchmark(name)
    reference = catalog_entry(benchmark).reference  # type: ignore[union-attr]
    assert reference is not None and reference.split == "assessment" and reference.episodes == 32
    assert reference.baseline > reference.random > benchmark.spec.failure_score  # type: ignore[operator]
    assert benchmark.spec.metadata["reference_scores"]["baseline"] == reference.baseline
    assert benchmark.spec.metadata["family"] == "mujoco"


def test_reacher_feedback_gives_the_final_distance(evaluator: Evaluator) -> None:
    result = run(evaluator, "reacher5", baseline("reacher5"), 3)
    content = result.feedback.content
    for episode in content["episodes"]:
        summary = episode["summary"]
        assert episode["length"] == 50 and episode["truncated"] is True
        assert summary["reached"] == (summary["final_distance"] < 0.02)
        assert episode["termination"] == ("reached_goal" if summary["reached"] else "truncated")
        assert 0 <= summary["final_distance"] < 0.42
    distances = [e["summary"]["final_distance"] for e in content["episodes"]]
    assert content["domain"]["mean_final_distance"] == pytest.approx(sum(distances) / 3)
    # The random arm ends farther from its target than the controller does.
    random = run(evaluator, "reacher5", RANDOM_POLICY_DIR, 3).feedback.content["domain"]
    assert random["mean_final_distance"] > content["domain"]["mean_final_distance"]


def test_halfcheetah_runs_forward(evaluator: Evaluator) -> None:
    """One Episode of the default profile: the gait covers ground at a steady speed."""
    gait = run(evaluator, "halfcheetah5", baseline("halfcheetah5"), 1)
    (episode,) = gait.feedback.content["episodes"]
    summary = episode["summary"]
    assert episode["termination"] == "truncated" and episode["length"] == 1000
    assert set(summary) == {"distance", "forward_velocity"}
    assert summary["distance"] > 20 and summary["forward_velocity"] == pytest.approx(
        summary["distance"] / 50, abs=1e-5
    )
    assert episode["return"] > 500


def test_ant_stands_and_random_falls(evaluator: Evaluator) -> None:
    ours = run(evaluator, "ant5", baseline("ant5"), 1, profile="calm")
    (episode,) = ours.feedback.content["episodes"]
    assert episode["termination"] == "truncated" and episode["summary"]["fell"] is False
    assert episode["return"] > 900
    random = run(evaluator, "ant5", RANDOM_POLICY_DIR, 4)
    terminations = random.feedback.content["terminations"]
    assert terminations.get("fell", 0) >= 1
    for row in random.feedback.content["episodes"]:
        assert row["summary"]["fell"] == (row["termination"] == "fell") == row["terminated"]
    assert random.feedback.score < episode["return"]


def test_pusher_feedback_gives_object_to_goal(evaluator: Evaluator) -> None:
    result = run(evaluator, "pusher5", RANDOM_POLICY_DIR, 1)
    (episode,) = result.feedback.content["episodes"]
    summary = episode["summary"]
    assert episode["termination"] == "truncated" and episode["length"] == 100
    assert set(summary) == {"final_distance", "initial_distance", "closer", "tip_to_object"}
    assert 0.1 < summary["initial_distance"] < 0.5 and summary["tip_to_object"] > 0


def test_the_same_episode_twice_gives_identical_traces(evaluator: Evaluator) -> None:
    name = "pusher5"
    benchmark = load_benchmark(name)
    program = Program.from_directory(baseline(name))
    config = EvaluationConfig(split="validation", episodes=1, seed=3, jobs=1, trace_steps=10_000)
    first, second = (evaluator.evaluate(program, benchmark, config).records[0] for _ in range(2))
    assert first.trace and first.steps == 100
    assert first.steps == second.steps and first.total_reward == second.total_reward
    assert first.summary == second.summary
    for a, b in zip(first.trace, second.trace, strict=True):
        assert (a.action, a.reward, a.terminated, a.truncated) == (
            b.action,
            b.reward,
            b.terminated,
            b.truncated,
        )
        assert (a.observation == b.observation).all()


def test_profiles_order_difficulty_and_change_the_environment() -> None:
    for name in TASKS:
        entry = catalog_entry(load_benchmark(name))
        assert entry is not None and entry.family == "mujoco" and entry.suites == ("core16",)
        assert entry.profile == "standard"
        assert [p.difficulty for p in entry.profiles] == list(range(len(entry.profiles)))
    long = load_benchmark("reacher5", {"profile": "long"})
    assert (
        long.spec.max_episode_steps == 100 and long.spec.environment_parameters["profile"] == "long"
    )
    assert long.spec.failure_score == 2 * load_benchmark("reacher5").spec.failure_score  # type: ignore[operator]
    assert catalog_entry(long).suites == ()  # type: ignore[union-attr]
    noisy = load_benchmark("ant5", {"profile": "noisy"})
    assert noisy.spec.environment_parameters["reset_noise_scale"] == 0.3
    assert noisy.spec.environment_digest != load_benchmark("ant5").spec.environment_digest
    with pytest.raises(Exception, match="calm, standard, noisy"):
        load_benchmark("halfcheetah5", {"profile": "wild"})


def test_gymnasium_mujoco_ids_work_with_the_extra(evaluator: Evaluator) -> None:
    """The mujoco extra still serves gymnasium:<id> for MuJoCo environments outside Core16."""
    hopper = load_benchmark(
        "gymnasium:Hopper-v5", {"max_episode_steps": "20", "failure_return": "-1000"}
    )
    assert hopper.spec.action_space["shape"] == [3]
    result = evaluator.evaluate(
        Program.from_directory(RANDOM_POLICY_DIR),
        hopper,
        EvaluationConfig(split="train", episodes=1, seed=0, jobs=1),
    )
    assert result.failures == 0 and 0 < result.records[0].steps <= 20
