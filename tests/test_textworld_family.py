"""The TextWorld family with real generated games: conformance, the baseline beating a
uniform-random policy, the content-addressed game cache (generated once, then instant; safe
when Episodes make the same game at once), action validation, the domain Feedback, and the
same Episodes in two interpreters that each generate their own games."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evopolicygym.benchmark import BenchmarkError, InvalidAction, catalog_entry, check_benchmark
from evopolicygym.evaluation import EvaluationResult, Evaluator
from evopolicygym.registry import load_benchmark
from tests.support.determinism import fingerprints
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("textworld")

from evopolicygym_textworld import (  # noqa: E402 (after the family check)
    BASELINES_DIR,
    CACHE_ENV,
    VERBS,
    cache_key,
    ensure_game,
)

TASKS = ("textworld_coin", "textworld_treasure", "textworld_cooking")
RANDOM = BASELINES_DIR / "random"


@pytest.fixture(scope="module", autouse=True)
def game_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One empty game cache for the module's Episodes (generated once, shared by its tests)."""
    directory = tmp_path_factory.mktemp("textworld-cache")
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(directory)
    yield directory
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(scope="module")
def cooking_runs(evaluator: Evaluator) -> tuple[EvaluationResult, EvaluationResult]:
    """The baseline and the random program on the same two easy cooking games."""
    ours = family_run(
        evaluator, "textworld_cooking", baseline("textworld_cooking"), 2, profile="easy"
    )
    random = family_run(evaluator, "textworld_cooking", RANDOM, 2, profile="easy")
    return ours, random


def test_conformance_on_the_easiest_coin_profile() -> None:
    report = check_benchmark(load_benchmark("textworld_coin", {"profile": "easy"}), episodes=1)
    assert report.ok, [c for c in report.checks if not c.ok]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["textworld_treasure", "textworld_cooking"])
def test_conformance(name: str) -> None:
    report = check_benchmark(load_benchmark(name, {"profile": "easy"}), episodes=1)
    assert report.ok, [c for c in report.checks if not c.ok]


def test_the_baseline_wins_easy_cooking_games_random_does_not(
    cooking_runs: tuple[EvaluationResult, EvaluationResult],
) -> None:
    ours, random = cooking_runs
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.content["terminations"] == {"won": 2}
    assert ours.feedback.score == 1.0 > random.feedback.score
    for episode in ours.feedback.content["episodes"]:
        assert episode["return"] == 1.0 and episode["summary"]["won"] is True


def test_feedback_reports_points_moves_and_inadmissible_commands(
    cooking_runs: tuple[EvaluationResult, EvaluationResult],
) -> None:
    ours, random = cooking_runs
    for result in (ours, random):
        content = result.feedback.content
        for episode in content["episodes"]:
            summary = episode["summary"]
            assert episode["termination"] in ("won", "lost", "truncated")
            assert summary["moves"] == episode["length"]
            assert 0 <= summary["points"] <= summary["max_points"]
            # The return is the share of the points scored.
            assert episode["return"] == pytest.approx(summary["points"] / summary["max_points"])
            assert 1 <= len(summary["last_observations"]) <= 3
            assert all(len(text) <= 600 for text in summary["last_observations"])
            assert summary["won"] is (episode["termination"] == "won")
        assert content["domain"]["won_rate"] == content["won_rate"]
    # The baseline chooses among the admissible commands; the random program does too.
    assert all(e["summary"]["inadmissible"] == [] for e in ours.feedback.content["episodes"])
    assert ours.feedback.content["domain"]["mean_inadmissible_commands"] == 0.0
    last = ours.feedback.content["episodes"][0]["summary"]["last_observations"][-1]
    assert "You eat the meal" in last


def test_an_inadmissible_command_is_played_and_counted() -> None:
    benchmark = load_benchmark("textworld_cooking", {"profile": "easy"})
    env = benchmark.make_environment(benchmark.plan("assessment", 0, 1)[0])
    try:
        first = env.reset()
        assert first["text"].startswith("You are hungry!") and "-= " in first["description"]
        assert first["score"] == 0 and first["max_score"] >= 3 and first["moves"] == 0
        assert "look" in first["admissible_commands"]
        step = env.step(benchmark.validate_action("Eat   the CEILING"))
        assert step.reward == 0.0 and not step.terminated and step.observation["moves"] == 1
        summary = env.summary()
        assert summary["inadmissible"] == ["eat the ceiling"]
        assert summary["inadmissible_commands"] == 1 and summary["termination"] == "stopped"
    finally:
        env.close()


def test_actions_are_bounded_printable_commands_starting_with_a_verb() -> None:
    benchmark = load_benchmark("textworld_coin", {"profile": "easy"})
    assert benchmark.validate_action("  Go   North ") == "go north"
    assert benchmark.validate_action("open frosted-glass door") == "open frosted-glass door"
    for bad in (3, b"go north", None, "", "   ", "dance", "go\x00north", "go north\n", "é"):
        with pytest.raises(InvalidAction):
            benchmark.validate_action(bad)
    with pytest.raises(InvalidAction):
        benchmark.validate_action("look " + "a" * 200)
    space = benchmark.spec.action_space
    assert space["type"] == "text" and space["verbs"] == list(VERBS)
    import random

    rng = random.Random(5)
    for _ in range(50):
        assert benchmark.validate_action(benchmark.sample_action(rng)).split()[0] in VERBS


def test_admissible_commands_can_be_hidden() -> None:
    hidden = load_benchmark("textworld_coin", {"profile": "easy", "admissible": "false"})
    assert "admissible_commands" not in hidden.spec.observation_space["fields"]
    assert hidden.spec.action_space["choices"] is None
    shown = load_benchmark("textworld_coin", {"profile": "easy"})
    assert hidden.spec.environment_digest != shown.spec.environment_digest
    hidden_medium = catalog_entry(load_benchmark("textworld_coin", {"admissible": "false"}))
    assert hidden_medium is not None and hidden_medium.suites == ()
    assert hidden_medium.reference is None
    with pytest.raises(BenchmarkError, match="true or false"):
        load_benchmark("textworld_coin", {"admissible": "maybe"})


def test_profiles_catalog_and_references() -> None:
    for name in TASKS:
        entry = catalog_entry(load_benchmark(name))
        assert entry is not None and entry.family == "textworld"
        assert entry.suites == ("frontier",) and entry.profile == "medium"
        assert [p.name for p in entry.profiles] == ["easy", "medium", "hard"]
        assert [p.difficulty for p in entry.profiles] == [0, 1, 2]
        reference = entry.reference
        assert reference is not None and reference.episodes == 32
        assert reference.split == "assessment" and reference.baseline > reference.random
        easy = catalog_entry(load_benchmark(name, {"profile": "easy"}))
        assert easy is not None and easy.suites == () and easy.reference is None
    steps = [
        load_benchmark("textworld_coin", {"profile": p}).spec.max_episode_steps
        for p in ("easy", "medium", "hard")
    ]
    assert steps == sorted(steps) and steps[0] < steps[-1]


def test_the_cache_is_content_addressed_concurrent_safe_and_instant_the_second_time(
    tmp_path: Path,
) -> None:
    # Two Episodes make the same game at once into an empty cache (two generator processes
    # race to rename their copy into place): both get it, and one copy stays.
    with ThreadPoolExecutor(2) as pool:
        made = list(
            pool.map(
                lambda _: ensure_game("tw-coin_collector", {"level": 2}, 7, tmp_path), range(2)
            )
        )
    assert made[0].story == made[1].story and all(m.generated for m in made)
    assert [p.name for p in tmp_path.iterdir()] == [cache_key("tw-coin_collector", {"level": 2}, 7)]
    story = made[0].story
    assert story.parent.parent == tmp_path and story.stat().st_size > 10_000
    assert sorted(p.name for p in story.parent.iterdir()) == ["game.json", "game.z8"]
    started = time.monotonic()
    again = ensure_game("tw-coin_collector", {"level": 2}, 7, tmp_path)
    assert time.monotonic() - started < 0.5
    assert again.generated is False and again.story == story
    # The key is a digest of what makes the game: any change names another one.
    keys = {
        cache_key("tw-coin_collector", {"level": 2}, 7),
        cache_key("tw-coin_collector", {"level": 2}, 8),
        cache_key("tw-coin_collector", {"level": 3}, 7),
        cache_key("tw-treasure_hunter", {"level": 2}, 7),
    }
    assert len(keys) == 4 and all(len(k) == 64 for k in keys)


def test_the_same_episodes_in_two_interpreters_with_their_own_caches(tmp_path: Path) -> None:
    """The cooking generator depends on the hash seed unless pinned: each interpreter makes
    its own game, and both play the same Episode, byte for byte."""
    caches = [tmp_path / "one", tmp_path / "two"]
    program = baseline("textworld_cooking")

    def run(index: int) -> list[dict[str, object]]:
        return fingerprints(
            "textworld_cooking",
            program,
            params={"profile": "easy"},
            episodes=1,
            hash_seed=str(index + 1),
            env={CACHE_ENV: str(caches[index])},
        )

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(run, range(2))
    assert first == second
    assert first[0]["status"] == "ok" and first[0]["return"] == 1.0 and first[0]["digest"]
    games = [sorted(p.relative_to(c) for p in c.rglob("*") if p.is_file()) for c in caches]
    assert games[0] == games[1] and len(games[0]) == 2
    for name in games[0]:
        assert (caches[0] / name).read_bytes() == (caches[1] / name).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_baseline_beats_random_on_the_default_profile(evaluator: Evaluator, name: str) -> None:
    ours = family_run(evaluator, name, baseline(name), 3)
    random = family_run(evaluator, name, RANDOM, 3)
    assert ours.failures == 0 and random.failures == 0
    assert ours.feedback.score > random.feedback.score
    reference = catalog_entry(load_benchmark(name)).reference  # type: ignore[union-attr]
    assert reference is not None
    assert load_benchmark(name).spec.metadata["reference_scores"]["baseline"] == reference.baseline


@pytest.mark.slow
@pytest.mark.parametrize("name", ["textworld_coin", "textworld_treasure"])
def test_without_admissible_commands_the_baseline_guesses_them(
    evaluator: Evaluator, name: str
) -> None:
    result = family_run(evaluator, name, baseline(name), 2, profile="easy", admissible="false")
    assert result.feedback.content["terminations"] == {"won": 2}
    assert "admissible_commands" not in result.records[0].initial_observation
