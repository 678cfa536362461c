"""The NetHack family with the real NLE and MiniHack: conformance of every task, the rule
bot beating a uniform-random policy, the domain Feedback (score, depth, cause of death and
the last screens; goal reached), Episodes replaying identically in separate interpreters,
and video frames of the terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.benchmark.video import VideoOptions
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark
from tests.support.cli import cli
from tests.support.determinism import fingerprints
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("nethack")

MINIHACK = (
    "minihack_room",
    "minihack_corridor",
    "minihack_mazewalk",
    "minihack_river",
    "minihack_keyroom",
    "minihack_lavacross",
    "minihack_wod",
    "minihack_eat",
)
TASKS = ("nethack", *MINIHACK)


@pytest.mark.parametrize("name", TASKS)
def test_conformance(name: str) -> None:
    report = check_benchmark(load_benchmark(name))
    assert report.ok, [c for c in report.checks if not c.ok]


def test_catalog_entries_profiles_and_references() -> None:
    for name in TASKS:
        benchmark = load_benchmark(name)
        entry = catalog_entry(benchmark)
        assert entry is not None and entry.family == "nethack" and entry.suites == ("frontier",)
        assert [p.difficulty for p in entry.profiles] == list(range(len(entry.profiles)))
        reference = entry.reference
        assert reference is not None and reference.episodes == 32
        assert reference.baseline > reference.random
        metadata = benchmark.spec.metadata
        assert len(metadata["actions"]) == len(metadata["keys"])
        assert benchmark.spec.action_space == {"type": "discrete", "n": len(metadata["keys"])} | {
            "start": 0
        }
    game = load_benchmark("nethack")
    keys = game.spec.metadata["keys"]
    assert len(keys) == 121 and ord("e") in keys and 240 in keys  # eat, and M-p: pray
    assert game.spec.metadata["blstats"][:2] == ["x", "y"] and game.spec.failure_score == 0.0
    wizard = load_benchmark("nethack", {"profile": "wizard"})
    assert wizard.spec.environment_parameters["character"] == "wiz-elf-cha-mal"
    maze = load_benchmark("minihack_mazewalk", {"profile": "9x9"})
    assert maze.spec.metadata["env_id"] == "MiniHack-MazeWalk-9x9-v0"
    assert maze.spec.max_episode_steps == 200 and maze.spec.failure_score == pytest.approx(-2.0)


@pytest.mark.parametrize("name", ["minihack_room", "minihack_wod", "minihack_eat"])
def test_baseline_beats_random(evaluator: Evaluator, name: str) -> None:
    ours = family_run(evaluator, name, baseline(name), 4)
    random = family_run(evaluator, name, RANDOM_POLICY_DIR, 4)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score
    content = ours.feedback.content
    assert content["terminations"] == {"reached_goal": 4}
    for episode in content["episodes"]:
        summary = episode["summary"]
        assert summary["goal_reached"] is True and summary["died"] is False
        assert summary["steps"] == episode["length"] and episode["return"] > 0.9


def test_nethack_feedback_has_score_depth_and_screens(evaluator: Evaluator) -> None:
    result = family_run(evaluator, "nethack", baseline("nethack"), 1)
    (episode,) = result.feedback.content["episodes"]
    summary = episode["summary"]
    assert episode["termination"] in ("died", "truncated")
    assert summary["died"] == (episode["termination"] == "died")
    assert summary["died"] == (summary["cause_of_death"] is not None)
    assert summary["score"] >= episode["return"] >= 0
    assert summary["max_depth"] >= summary["depth"] >= 1 and summary["turns"] > 0
    assert 1 <= len(summary["last_screens"]) <= 3 and len(summary["last_messages"]) <= 5
    for screen in summary["last_screens"]:
        assert len(screen.splitlines()) <= 24 and len(screen) <= 24 * 81
    assert any(screen.strip() for screen in summary["last_screens"])


@pytest.mark.slow
def test_nethack_episodes_replay_in_separate_interpreters() -> None:
    """The game is seeded from the Episode seed only: two interpreters with different hash
    seeds play identical Episodes (every observation and action)."""
    for name, episodes in (("nethack", 1), ("minihack_room", 3), ("minihack_river", 2)):
        program = baseline(name)
        first = fingerprints(name, program, episodes=episodes, hash_seed="1")
        second = fingerprints(name, program, episodes=episodes, hash_seed="2")
        assert first == second
        assert all(row["status"] == "ok" and row["digest"] for row in first)
        assert len({row["digest"] for row in first}) == episodes  # different games


def test_minihack_replays_in_separate_interpreters() -> None:
    program = baseline("minihack_corridor")
    first = fingerprints("minihack_corridor", program, episodes=2, hash_seed="1")
    second = fingerprints("minihack_corridor", program, episodes=2, hash_seed="2")
    assert first == second and first[0]["digest"] != first[1]["digest"]


def test_render_frame_draws_the_terminal() -> None:
    from evopolicygym_nethack.render import frame

    benchmark = load_benchmark("minihack_room")
    env = benchmark._make()  # the Gymnasium environment itself, as frame() receives it
    try:
        env.reset(seed=5)
        image = frame(env)
        assert image.shape == (24 * 12, 80 * 6, 3) and image.dtype.name == "uint8"
        assert image.max() > 0 and len({tuple(p) for p in image.reshape(-1, 3)[::7]}) > 2
        env.step(0)
        assert frame(env).shape == image.shape
    finally:
        env.close()


def test_an_episode_is_filmed_from_the_terminal(evaluator: Evaluator) -> None:
    benchmark = load_benchmark("minihack_room").with_videos(  # type: ignore[attr-defined]
        VideoOptions(episodes="all", max_frames=8, format="webp")
    )
    config = EvaluationConfig(split="assessment", episodes=1, seed=0, jobs=1, trace_steps=0)
    result = evaluator.evaluate(
        Program.from_directory(baseline("minihack_room")), benchmark, config
    )
    (video,) = [a for a in result.feedback.artifacts if a.name == "video-episode-000.webp"]
    with Image.open(io.BytesIO(video.data)) as image:
        assert image.size == (80 * 6, 24 * 12)


@pytest.mark.slow
def test_a_reference_agent_run_on_the_full_game_finishes_replays_and_exports(
    tmp_path: Path,
) -> None:
    """The whole path on NetHack itself: a Run of the offline reference agent, its replay,
    a verified record, and its rollouts loaded back with `datasets`."""
    import datasets

    store = str(tmp_path / "store")
    done = cli(
        *("run", "--benchmark", "nethack", "--agent", "reference", "--budget", "4"),
        *("--validation-episodes", "2", "--assessment-episodes", "2", "--store", store, "--json"),
    )
    assert done.code == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "finished" and outcome["budget_used"] == 4
    run_id = outcome["run_id"]
    replayed = cli("record", "replay", run_id, "--store", store)
    assert replayed.code == 0 and f"ok: run {run_id}" in replayed.stdout
    assert cli("record", "verify", "--store", store).code == 0
    # Each Submission published videos of its best and worst Episode as bulk artifacts.
    shown = cli("record", "events", run_id, "--store", store, "--json")
    published = [
        json.loads(line) for line in shown.stdout.splitlines() if "SubmissionPublished" in line
    ]
    assert published and all(
        any(a["name"].startswith("video-") for a in p["payload"]["artifacts"]) for p in published
    )
    out = tmp_path / "export"
    exported = cli("export", "--store", store, "--output", str(out), "--format", "rollouts")
    assert exported.code == 0, exported.stderr[-2000:]
    rows = datasets.load_dataset(str(out), "rollouts")["train"]
    assert len(rows) >= 4 and set(rows["benchmark_id"]) == {"nethack"}
    assert all(steps > 0 for steps in rows["steps"])
