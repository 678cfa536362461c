"""The Box2D family's Core16 tasks with the real environments: bipedal (BipedalWalker) and
racing (CarRacing from pixels). Conformance, the baselines beating a uniform-random policy
on the assessment split, deterministic Episodes, the domain Feedback (why an Episode ended,
distance and falls; tiles, track completion, off-track steps and the frames.png strip),
profiles and the catalog listing. Racing Episodes are cut short (max_episode_steps) to keep
the file quick: a full one is 1000 rendered frames."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from evopolicygym.benchmark import RANDOM_POLICY_DIR, catalog_entry, check_benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("box2d", "Box2D")

SHORT = "60"  # racing steps in these tests


run = family_run


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_catalog_lists_both_in_core16_with_profiles_and_references() -> None:
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "benchmarks",
            "list",
            "--suite",
            "core16",
            "--family",
            "box2d",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("bipedal", "racing"):
        line = next(row for row in listing.splitlines() if row.startswith(name))
        assert "box2d" in line and "yes" in line
    walker, car = catalog_entry(load_benchmark("bipedal")), catalog_entry(load_benchmark("racing"))
    assert walker is not None and car is not None
    assert walker.suites == ("core16",) and car.suites == ("core16",)
    assert [p.name for p in walker.profiles] == ["normal", "hardcore"]
    assert [p.name for p in car.profiles] == ["standard", "randomized"]
    others = [
        catalog_entry(load_benchmark(n, {"profile": p}))
        for n, p in (("bipedal", "hardcore"), ("racing", "randomized"))
    ]
    for entry in (walker, car, *others):
        assert (
            entry is not None
            and entry.reference is not None
            and entry.reference.split == "assessment"
        )
        assert entry.reference.baseline > entry.reference.random
    # Another profile, or racing's shortened Episodes, is not Core16's member and carries no
    # reference measured on something else.
    hard = load_benchmark("bipedal", {"profile": "hardcore"})
    assert hard.spec.environment_parameters["hardcore"] is True
    assert catalog_entry(hard).suites == ()  # type: ignore[union-attr]
    short = catalog_entry(load_benchmark("racing", {"max_episode_steps": SHORT}))
    assert short is not None and short.suites == () and short.reference is None
    assert (
        load_benchmark("racing", {"profile": "randomized"}).spec.environment_digest
        != load_benchmark("racing").spec.environment_digest
    )


def test_bad_parameters_are_one_line_errors() -> None:
    from evopolicygym.benchmark import BenchmarkError

    with pytest.raises(BenchmarkError, match="max_episode_steps must be an integer from 1 to 1000"):
        load_benchmark("racing", {"max_episode_steps": "fast"})
    with pytest.raises(BenchmarkError, match="hardcore"):
        load_benchmark("bipedal", {"profile": "impossible"})


def test_conformance() -> None:
    report = check_benchmark(load_benchmark("bipedal"))
    assert report.ok, [c for c in report.checks if not c.ok]
    report = check_benchmark(
        load_benchmark("racing", {"max_episode_steps": SHORT}), episodes=1, steps=25
    )
    assert report.ok, [c for c in report.checks if not c.ok]


def test_bipedal_baseline_walks_where_random_falls(evaluator: Evaluator) -> None:
    ours = run(evaluator, "bipedal", baseline("bipedal"), 3)
    random = run(evaluator, "bipedal", RANDOM_POLICY_DIR, 3)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score + 100
    for result in (ours, random):
        content = result.feedback.content
        for episode in content["episodes"]:
            summary = episode["summary"]
            assert episode["termination"] in ("fell", "reached_end", "truncated")
            assert summary["fell"] == (episode["termination"] == "fell")
            assert summary["forward_velocity"] == pytest.approx(
                summary["distance"] / episode["length"] * 50, abs=1e-3
            )
        assert (
            content["domain"]["fell_rate"]
            == sum(e["summary"]["fell"] for e in content["episodes"]) / 3
        )
    assert (
        ours.feedback.content["domain"]["mean_distance"]
        > 20
        > random.feedback.content["domain"]["mean_distance"]
    )


def test_racing_baseline_drives_where_random_wanders(evaluator: Evaluator) -> None:
    ours = run(evaluator, "racing", baseline("racing"), 2, trace_steps=5, max_episode_steps=SHORT)
    random = run(evaluator, "racing", RANDOM_POLICY_DIR, 2, max_episode_steps=SHORT)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score
    content = ours.feedback.content
    assert content["terminations"] == {"truncated": 2}
    for episode in content["episodes"]:
        summary = episode["summary"]
        assert "frames_png" not in summary  # moved into the artifact
        assert summary["lap_complete"] is False and summary["left_playfield"] is False
        assert 0 < summary["tiles_visited"] < summary["track_tiles"]
        assert summary["track_completion"] == pytest.approx(
            summary["tiles_visited"] / summary["track_tiles"], abs=1e-4
        )
        assert 0 <= summary["off_track_steps"] <= episode["length"] == int(SHORT)
        # -0.1 a frame and 1000/N a new tile: the return is what the tiles say.
        expected = (
            -0.1 * episode["length"] + 1000 * summary["tiles_visited"] / summary["track_tiles"]
        )
        assert episode["return"] == pytest.approx(expected, abs=1e-3)
    assert (
        content["domain"]["mean_tiles_visited"]
        > random.feedback.content["domain"]["mean_tiles_visited"]
    )
    artifacts = {a.name: a for a in ours.feedback.artifacts}
    assert set(artifacts) == {"trace.jsonl", "frames.png"}
    strip = artifacts["frames.png"]
    assert strip.media_type == "image/png" and len(strip.data) < 64 * 1024
    # The reset frame and one every 25 steps and the last (0, 25, 50, 60), 48x48 each, 2 apart.
    assert png_size(strip.data) == (4 * 48 + 3 * 2, 48)


def test_the_frame_strip_decodes_to_the_frames() -> None:
    from evopolicygym_box2d import png_strip

    frames = [np.full((4, 3, 3), i * 40, dtype=np.uint8) for i in range(3)]
    frames[1][0, 0] = (255, 0, 7)
    data = png_strip(frames, gap=1)
    assert png_size(data) == (3 * 3 + 2, 4)
    # One IDAT: each row a filter byte 0 then RGB.
    idat = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[idat - 4 : idat])
    rows = np.frombuffer(
        zlib.decompress(data[idat + 4 : idat + 4 + length]), dtype=np.uint8
    ).reshape(4, 1 + 11 * 3)
    assert (rows[:, 0] == 0).all()
    image = rows[:, 1:].reshape(4, 11, 3)
    assert (image[:, 3] == 0).all() and (image[:, 7] == 0).all()  # the gaps
    assert tuple(image[0, 4]) == (255, 0, 7) and tuple(image[1, 4]) == (40, 40, 40)
    assert (image[:, 8:] == 80).all()


@pytest.mark.parametrize(
    ("name", "params"), [("bipedal", {}), ("racing", {"max_episode_steps": "30"})]
)
def test_the_same_episode_twice_gives_identical_traces(
    evaluator: Evaluator, name: str, params: dict[str, str]
) -> None:
    benchmark = load_benchmark(name, params)
    program = Program.from_directory(baseline(name))
    config = EvaluationConfig(split="validation", episodes=1, seed=3, jobs=1, trace_steps=10_000)
    first, second = (evaluator.evaluate(program, benchmark, config).records[0] for _ in range(2))
    assert first.trace and first.steps >= 30
    assert first.steps == second.steps and first.total_reward == second.total_reward
    assert first.summary == second.summary
    for a, b in zip(first.trace, second.trace, strict=True):
        assert (a.action, a.reward, a.terminated, a.truncated) == (
            b.action,
            b.reward,
            b.terminated,
            b.truncated,
        )
        assert np.array_equal(np.asarray(a.observation), np.asarray(b.observation))


def test_racing_frames_reach_the_policy_as_uint8_arrays(
    evaluator: Evaluator, tmp_path: Path
) -> None:
    """The observation crosses the boundary as one tensor and arrives as a read-only NumPy
    array of the frame's shape and dtype (not nested lists)."""
    (tmp_path / "policy.py").write_text(
        "import numpy as np\n"
        "class P:\n"
        "    def act(self, observation):\n"
        "        assert type(observation) is np.ndarray, type(observation)\n"
        "        assert observation.shape == (96, 96, 3) and observation.dtype == np.uint8\n"
        "        assert not observation.flags.writeable\n"
        "        return [0.0, 0.5, 0.0]\n"
        "def make_policy(context):\n"
        "    return P()\n"
    )
    result = run(evaluator, "racing", tmp_path, 1, max_episode_steps="10")
    assert result.failures == 0, result.feedback.content["episodes"][0]["failure"]


def test_racing_baseline_finds_the_road_in_randomized_colours(evaluator: Evaluator) -> None:
    """No road is grey there: the driver waits for the opening zoom, learns the road's colour
    from the start line and then follows it."""
    ours = run(
        evaluator, "racing", baseline("racing"), 1, profile="randomized", max_episode_steps="200"
    )
    random = run(
        evaluator, "racing", RANDOM_POLICY_DIR, 1, profile="randomized", max_episode_steps="200"
    )
    (mine,), (theirs,) = ours.feedback.content["episodes"], random.feedback.content["episodes"]
    assert mine["termination"] == "truncated"
    assert mine["summary"]["tiles_visited"] > theirs["summary"]["tiles_visited"]
    assert mine["summary"]["off_track_share"] < 0.5
