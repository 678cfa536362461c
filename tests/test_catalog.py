"""The catalog: suites and families known statically, installed or not; catalog entries and
difficulty profiles in the parameters digest; domain Feedback through the real evaluation
runner; `benchmarks check --suite core16` measuring baselines against random."""

from __future__ import annotations

import importlib.util
import json
import random as stdlib_random
from typing import Any

import gymnasium
import pytest
from click.testing import Result

from evopolicygym.benchmark import (
    CORE16,
    FAMILIES,
    RANDOM_POLICY_DIR,
    TASKS,
    BenchmarkError,
    CatalogEntry,
    EpisodeRecord,
    GymnasiumBenchmark,
    Profile,
    canonical_digest,
    catalog_entry,
    check_benchmark,
    domain_summary,
    install_hint,
    termination_of,
)
from evopolicygym.benchmark.catalog import _extras_installing
from evopolicygym.evaluation import EvaluationConfig, evaluate
from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, load_benchmark
from tests.support.cli import invoke

MINIGRID = importlib.util.find_spec("evopolicygym_minigrid") is not None
needs_minigrid = pytest.mark.skipif(not MINIGRID, reason="the minigrid family is not installed")
MUJOCO = importlib.util.find_spec("evopolicygym_mujoco") is not None
ROBOTICS = importlib.util.find_spec("evopolicygym_robotics") is not None


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    return line


# --------------------------------------------------------------------------- the static table


def test_core16_is_sixteen_ids_in_eight_capability_families() -> None:
    assert len(CORE16) == 16 and len({m.id for m in CORE16}) == 16
    assert [m.id for m in CORE16[:2]] == ["acrobot", "continuouscar"]
    assert {m.family for m in CORE16} <= set(FAMILIES)
    by_id = {m.id: m for m in CORE16}
    assert by_id["minigrid_doorkey"].environment == "MiniGrid-DoorKey-16x16-v0"
    assert by_id["minigrid_obstructedmaze"].environment == "MiniGrid-ObstructedMaze-1Q-v1"
    assert by_id["fetch_pickandplace"].family == "robotics"


def test_install_hints_say_what_the_installed_project_offers() -> None:
    # The minigrid extra installs the family distribution: read from evopolicygym's metadata.
    assert _extras_installing("evopolicygym-minigrid") == ["minigrid"]
    assert _extras_installing("evopolicygym-mujoco") == ["mujoco"]
    if not MUJOCO:
        assert install_hint("mujoco") == "uv sync --extra mujoco"
    assert install_hint("nope") == "no family 'nope' is known to this project"
    if MINIGRID:
        assert install_hint("minigrid") == "not provided by the installed evopolicygym-minigrid yet"


def test_list_suite_core16_names_all_sixteen_and_how_to_install_the_rest() -> None:
    rows = ok_json(invoke("benchmarks", "list", "--suite", "core16", "--json"))
    assert [r["benchmark_id"] for r in rows] == [m.id for m in CORE16]
    by_id = {r["benchmark_id"]: r for r in rows}
    for name in ("acrobot", "continuouscar"):
        assert by_id[name]["installed"] is True and by_id[name]["family"] == "classic"
        assert by_id[name]["suites"] == ["core16"]
    assert by_id["continuouscar"]["alias_of"] == "mountain-car-continuous"
    reacher = by_id["reacher5"]
    assert reacher["installed"] is MUJOCO and reacher["family"] == "mujoco"
    if not MUJOCO:
        assert reacher["install"] == install_hint("mujoco") == "uv sync --extra mujoco"
        assert reacher["description"] == TASKS["reacher5"].description
        assert reacher["environment"] == "Reacher-v5"
    if MINIGRID:
        assert by_id["minigrid_fourrooms"]["installed"] is True
        assert by_id["minigrid_fourrooms"]["environment"] == "MiniGrid-FourRooms-v0"
    human = invoke("benchmarks", "list", "--suite", "core16")
    assert (
        human.exit_code == 0
        and "fetch_pickandplace" in human.stdout
        and "continuouscar" in human.stdout
    )


def test_list_family_and_bad_filters() -> None:
    rows = ok_json(invoke("benchmarks", "list", "--family", "classic", "--json"))
    names = {r["benchmark_id"] for r in rows}
    assert {
        "cartpole",
        "frozen-lake",
        "acrobot",
        "mountain-car-continuous",
        "continuouscar",
    } <= names
    assert all(r["family"] == "classic" for r in rows)
    robotics = ok_json(invoke("benchmarks", "list", "--family", "robotics", "--json"))
    assert sorted(r["benchmark_id"] for r in robotics) == ["fetch_pickandplace", "fetch_push"]
    assert all(r["installed"] is ROBOTICS and r["family"] == "robotics" for r in robotics)
    # The unfiltered list names the suite's missing ids too.
    everything = {r["benchmark_id"]: r for r in ok_json(invoke("benchmarks", "list", "--json"))}
    assert everything["ant5"]["installed"] is MUJOCO and everything["cartpole"]["installed"] is True
    assert "core16" in one_line_error(invoke("benchmarks", "list", "--suite", "core17"))
    assert "minigrid" in one_line_error(invoke("benchmarks", "list", "--family", "toys"))


def test_continuouscar_is_mountain_car_continuous() -> None:
    """Core16's name and the old id build the same Benchmark: same id, digest and Episodes."""
    old, new = load_benchmark("mountain-car-continuous"), load_benchmark("continuouscar")
    assert new.spec.id == old.spec.id == "mountain-car-continuous"
    assert new.spec.environment_digest == old.spec.environment_digest
    assert new.plan("assessment", 0, 3) == old.plan("assessment", 0, 3)
    entry = catalog_entry(new)
    assert entry is not None and entry.aliases == ("continuouscar",) and entry.suites == ("core16",)
    reference = new.spec.metadata["reference_scores"]
    assert reference["baseline"] > reference["random"]


# --------------------------------------------------------------------------- entries and profiles


def test_catalog_entry_refuses_unordered_or_unknown_profiles() -> None:
    easy, hard = Profile(name="easy", difficulty=0), Profile(name="hard", difficulty=1)
    assert CatalogEntry(family="x", profiles=(easy, hard), profile="hard").difficulty == 1
    with pytest.raises(BenchmarkError, match="easiest first"):
        CatalogEntry(family="x", profiles=(hard, easy))
    with pytest.raises(BenchmarkError, match="not one of"):
        CatalogEntry(family="x", profiles=(easy,), profile="medium")
    with pytest.raises(BenchmarkError, match="duplicate"):
        CatalogEntry(family="x", profiles=(easy, easy))


@needs_minigrid
def test_profiles_are_in_the_parameters_digest_and_shown() -> None:
    default = ok_json(invoke("benchmarks", "show", "minigrid_doorkey", "--json"))
    small = ok_json(
        invoke("benchmarks", "show", "minigrid_doorkey", "--param", "profile=5x5", "--json")
    )
    assert default["profile"] == "16x16" and default["difficulty"] == 3
    assert small["profile"] == "5x5" and small["difficulty"] == 0
    assert [p["name"] for p in default["profiles"]] == ["5x5", "6x6", "8x8", "16x16"]
    assert [p["difficulty"] for p in default["profiles"]] == [0, 1, 2, 3]
    assert small["environment_parameters"] == {
        "view": "full",
        "max_episode_steps": 250,
        "profile": "5x5",
    }
    assert default["environment_digest"] != small["environment_digest"]
    # Only Core16's environment is the suite's member and carries the measured references.
    assert default["suites"] == ["core16"] and small["suites"] == []
    assert default["reference_scores"]["baseline"] > default["reference_scores"]["random"]
    assert small["reference_scores"] is None
    human = invoke("benchmarks", "show", "minigrid_doorkey")
    assert human.exit_code == 0 and "16x16  (this one)" in human.stdout
    line = one_line_error(
        invoke("benchmarks", "show", "minigrid_doorkey", "--param", "profile=99x99")
    )
    assert "unknown profile '99x99'" in line and "5x5, 6x6, 8x8, 16x16" in line


class _Gusty(gymnasium.ObservationWrapper):  # type: ignore[type-arg]
    """Observations with noise no seed controls: an Environment that cannot replay."""

    noise = stdlib_random.SystemRandom()

    def observation(self, observation: Any) -> Any:
        return observation + self.noise.uniform(-1e-3, 1e-3)


def _gusty(env: gymnasium.Env[Any, Any]) -> gymnasium.Env[Any, Any]:
    return _Gusty(env)


def test_a_benchmark_declared_not_deterministic_passes_replay_and_says_so() -> None:
    def build(deterministic: bool) -> GymnasiumBenchmark:
        return GymnasiumBenchmark(
            "Pendulum-v1", benchmark_id="gusty", wrap=_gusty,
            catalog=CatalogEntry(family="classic", deterministic=deterministic),
        )  # fmt: skip

    checks = {c.name: c for c in check_benchmark(build(True)).checks}
    assert not checks["replay determinism and close"].ok
    assert "differs when replayed" in checks["replay determinism and close"].detail
    declared = build(False)
    checks = {c.name: c for c in check_benchmark(declared).checks}
    assert checks["replay determinism and close"].ok
    assert (
        checks["replay determinism and close"].detail
        == "declared not deterministic: 2 of 2 Episodes differed when replayed"
    )
    assert declared.spec.metadata["deterministic"] is False
    spec = declared.plan("train", 0, 1)[0]
    record = EpisodeRecord(spec=spec, policy_seed=1, status="ok", total_reward=-5.0, steps=3)
    assert declared.score([record]).content["deterministic"] is False
    assert "deterministic" not in build(True).score([record]).content


def test_frozen_lake_profiles_name_its_maps_and_keep_its_digest() -> None:
    """The classic family's curriculum: a profile names a map and an ice, which the make
    keywords already put in the digest, so the digest is what it was without profiles."""
    default = load_benchmark("frozen-lake")
    entry = catalog_entry(default)
    assert entry is not None and entry.profile == "4x4" and entry.difficulty == 2
    assert [p.name for p in entry.profiles] == ["4x4-calm", "8x8-calm", "4x4", "8x8"]
    assert default.spec.environment_digest == canonical_digest(
        {
            "id": "frozen-lake",
            "environment_parameters": {
                "map_name": "4x4",
                "is_slippery": True,
                "max_episode_steps": 100,
            },
            "failure_score": 0.0,
        }
    )
    calm = load_benchmark("frozen-lake", {"profile": "8x8-calm"})
    same = load_benchmark("frozen-lake", {"map": "8x8", "slippery": "false"})
    assert (
        calm.spec.environment_digest
        == same.spec.environment_digest
        != default.spec.environment_digest
    )
    assert same.spec.metadata["profile"] == "8x8-calm" and same.spec.metadata["difficulty"] == 1
    line = one_line_error(
        invoke("benchmarks", "show", "frozen-lake", "--param", "profile=8x8", "--param", "map=4x4")
    )
    assert "not both" in line
    assert "4x4-calm, 8x8-calm, 4x4, 8x8" in one_line_error(
        invoke("benchmarks", "show", "frozen-lake", "--param", "profile=icy")
    )


# --------------------------------------------------------------------------- domain Feedback


def test_termination_and_domain_summary_over_records() -> None:
    benchmark = load_benchmark("acrobot")
    spec = benchmark.plan("train", 0, 1)[0]

    def record(status: str, summary: dict[str, Any], **kw: Any) -> EpisodeRecord:
        return EpisodeRecord(
            spec=spec,
            policy_seed=1,
            status=status,
            total_reward=0.0,
            steps=5,
            summary=summary,
            **kw,
        )  # type: ignore[arg-type]

    records = [
        record("ok", {"termination": "reached_goal", "goal": True, "steps_to_key": 4}),
        record(
            "ok", {"termination": "truncated", "goal": False, "steps_to_key": None}, truncated=True
        ),
        record("timeout", {"termination": "truncated", "goal": False, "steps_to_key": 1}),
        record("ok", {}, terminated=True),
    ]
    assert [termination_of(r) for r in records] == [
        "reached_goal",
        "truncated",
        "policy_timeout",
        "terminated",
    ]
    # Failed Episodes are left out; None is no value.
    assert domain_summary(records) == {"goal_rate": 0.5, "mean_steps_to_key": 4.0}


def test_classic_feedback_says_why_episodes_ended() -> None:
    """Through the real runner: the Environment's summary reaches the Feedback."""
    benchmark = load_benchmark("acrobot")
    program = Program.from_directory(baseline_dir(benchmark))  # type: ignore[arg-type]
    result = evaluate(
        program, benchmark, EvaluationConfig(split="assessment", episodes=2, seed=0, jobs=1)
    )
    content = result.feedback.content
    assert [e["termination"] for e in content["episodes"]] == ["reached_goal", "reached_goal"]
    assert content["terminations"] == {"reached_goal": 2}
    assert content["mean_length"] == sum(e.steps for e in result.episodes) / 2
    assert all(r.summary == {"termination": "reached_goal"} for r in result.records)
    random = Program.from_directory(RANDOM_POLICY_DIR)
    timed = evaluate(
        random, benchmark, EvaluationConfig(split="assessment", episodes=1, seed=0, jobs=1)
    )
    assert timed.feedback.content["terminations"] == {"truncated": 1}
    assert timed.episodes[0].steps == 500


# --------------------------------------------------------------------------- check --suite


def test_check_suite_core16_measures_baselines_against_random() -> None:
    report = ok_json(
        invoke("benchmarks", "check", "--suite", "core16", "--episodes", "1", "--json")
    )
    assert report["ok"] is True and report["episodes"] == 1
    rows = {r["benchmark_id"]: r for r in report["benchmarks"]}
    assert list(rows) == [m.id for m in CORE16]
    installed = [r for r in rows.values() if r["installed"]]
    assert {"acrobot", "continuouscar"} <= {r["benchmark_id"] for r in installed}
    if MINIGRID:
        assert {"minigrid_doorkey", "minigrid_obstructedmaze"} <= {
            r["benchmark_id"] for r in installed
        }
    for row in installed:
        assert row["ok"] is True and row["conformance"] is True, row
        assert row["baseline"] > row["random"]
        assert row["steps_per_s"] > 0 and row["fixed_cost_s"] > 0
    if MUJOCO:
        assert {"reacher5", "halfcheetah5", "ant5", "pusher5"} <= {
            r["benchmark_id"] for r in installed
        }
    else:
        assert rows["ant5"] == {
            "benchmark_id": "ant5", "family": "mujoco", "installed": False,
            "install": install_hint("mujoco"), "ok": True,
        }  # fmt: skip


def test_check_needs_an_id_or_a_suite() -> None:
    assert "--suite" in one_line_error(invoke("benchmarks", "check"))
    assert "not both" in one_line_error(
        invoke("benchmarks", "check", "acrobot", "--suite", "core16")
    )
    assert "core16" in one_line_error(invoke("benchmarks", "check", "--suite", "nope"))


def test_check_one_benchmark_against_random_with_a_profile() -> None:
    """`check ID --baseline`: what a family records as its reference scores, for one profile."""
    report = ok_json(
        invoke(
            "benchmarks",
            "check",
            "frozen-lake",
            "--param",
            "profile=4x4-calm",
            "--baseline",
            "--episodes",
            "2",
            "--json",
        )
    )
    assert report["ok"] is True and report["benchmark_id"] == "frozen-lake"
    assert report["baseline"] == 1.0 and report["random"] < 1.0  # the calm 4x4 map is solved
    assert report["baseline_terminations"] == {"reached_goal": 2}
    assert report["baseline_failures"] == 0 and report["problems"] == []
    assert report["steps_per_s"] > 0 and report["fixed_cost_s"] > 0
    human = invoke("benchmarks", "check", "acrobot", "--baseline", "--episodes", "1")
    assert human.exit_code == 0, human.output
    assert "baseline: " in human.stdout and "random: -500 on 1 assessment Episode " in human.stdout
    assert "not both" in one_line_error(
        invoke("benchmarks", "check", "--suite", "core16", "--baseline")
    )
