"""The card-game family with the real OpenSpiel games: conformance, deterministic matches,
imperfect information (the opponent's cards reach the policy only at a showdown), the
baseline beating a uniformly random legal policy on the assessment split (measured here and
as recorded in the catalog), an illegal action scored as a failure, the round summaries and
replay in the Feedback, profiles, and an offline Run on leduc."""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from evopolicygym.benchmark import (
    BenchmarkError,
    EpisodeRecord,
    InvalidAction,
    Step,
    catalog_entry,
    check_benchmark,
)
from evopolicygym.cli import main
from evopolicygym.evaluation import Evaluator
from evopolicygym.registry import load_benchmark
from tests.support.families import baseline, family_run, require_family, shared_evaluator  # noqa: F401 (the evaluator fixture)

require_family("cards")

from evopolicygym_cards import PROFILES, CardGameBenchmark  # noqa: E402 (after the skip)
from evopolicygym_cards.games import CATEGORIES  # noqa: E402
from evopolicygym_cards.measure import RANDOM_DIR, load_policy, measure, play, policy_seed  # noqa: E402

GAMES = ("leduc", "holdem_limit")
OBSERVATION_KEYS = {
    "game", "hand", "hands", "done", "seat", "private_cards", "board", "round", "betting", "pot",
    "to_call", "my_contribution", "opponent_contribution", "legal_actions", "chips",
    "finished_hands",
}  # fmt: skip


evaluate = functools.partial(family_run, trace_steps=10_000)


def write_program(directory: Path, source: str) -> Path:
    directory.mkdir()
    (directory / "policy.py").write_text(source)
    return directory


# --- conformance --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GAMES)
def test_benchmarks_check_passes(name: str) -> None:
    result = CliRunner().invoke(main, ["benchmarks", "check", name, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["benchmark_id"] == name
    assert {c["name"] for c in report["checks"]} >= {
        "replay determinism and close",
        "failures never win",
    }


@pytest.mark.parametrize(("name", "profile"), [(g, p) for g in GAMES for p in PROFILES[g]])
def test_every_profile_conforms(name: str, profile: str) -> None:
    report = check_benchmark(load_benchmark(name, {"profile": profile}))
    assert report.ok, [c for c in report.checks if not c.ok]


def test_the_failure_score_is_every_hand_lost_at_the_largest_loss() -> None:
    leduc = load_benchmark("leduc")
    holdem = load_benchmark("holdem_limit", {"hands": "10"})
    assert leduc.spec.score_direction == "maximize" and leduc.spec.failure_score == -13.0 * 20
    assert holdem.spec.failure_score == -240.0 * 10
    assert holdem.spec.environment_parameters == {
        "game": "holdem_limit",
        "profile": "rule",
        "hands": 10,
    }
    # Picklable for parallel evaluation, the same Benchmark on the other side.
    copy = pickle.loads(pickle.dumps(holdem))
    assert copy.spec == holdem.spec and catalog_entry(copy) == catalog_entry(holdem)


# --- determinism ---------------------------------------------------------------------------------


def _match(name: str, seed_index: int, profile: str = "rule") -> list[Any]:
    """One Episode played by the baseline: the observations, (observation, reward, terminated)
    per step, and the Environment's summary last."""
    benchmark = CardGameBenchmark(name, profile=profile)
    episode = benchmark.plan("train", 5, seed_index + 1)[seed_index]
    env = benchmark.make_environment(episode)
    policy = load_policy(benchmark.baseline_dir())(None)
    observation = env.reset()
    frames: list[Any] = [observation]
    while True:
        result = env.step(policy.act(observation))
        observation = result.observation
        frames.append((observation, result.reward, result.terminated))
        if result.terminated:
            break
    frames.append(env.summary())
    env.close()
    return frames


@pytest.mark.parametrize("name", GAMES)
def test_an_episode_replays_identically_and_episodes_differ(name: str) -> None:
    first = _match(name, 0)
    second = _match(name, 0)
    other = _match(name, 1)
    assert msgspec.json.encode(first) == msgspec.json.encode(second)
    assert msgspec.json.encode(first) != msgspec.json.encode(other)
    summary = first[-1]
    assert summary["hands_played"] == 20 and len(summary["hands"]) == 20
    # The rewards add up to the match's chips, which the hands' results make.
    assert (
        sum(f[1] for f in first[1:-1])
        == summary["chips"]
        == sum(h["result"] for h in summary["hands"])
    )


@pytest.mark.parametrize("name", GAMES)
def test_a_one_hand_match_always_asks_the_policy(name: str) -> None:
    """The policy acts first in hand 0, so even a match of one hand (where the opponent could
    otherwise fold before the policy's turn) has a decision, and its reward is the hand's."""
    benchmark = CardGameBenchmark(name, profile="rule", hands=1)
    random_policy = load_policy(RANDOM_DIR)
    for episode in benchmark.plan("train", 0, 40):
        env = benchmark.make_environment(episode)
        policy = random_policy(type("Context", (), {"policy_seed": episode.index})())
        observation, rewards = env.reset(), []
        assert observation["hand"] == 0 and observation["legal_actions"]
        while True:
            result = env.step(policy.act(observation))
            observation = result.observation
            rewards.append(result.reward)
            if result.terminated:
                break
        summary = env.summary()
        env.close()
        assert (
            observation["done"] is True and sum(rewards) == summary["chips"] == observation["chips"]
        )
        assert summary["hands_played"] == 1


def test_the_same_episode_evaluated_twice_gives_identical_traces(evaluator: Evaluator) -> None:
    first, second = (
        evaluate(evaluator, "holdem_limit", baseline("holdem_limit"), 2).records for _ in range(2)
    )
    for a, b in zip(first, second, strict=True):
        assert a.trace and a.steps == len(a.trace) > 20
        assert msgspec.json.encode([a.trace, a.summary, a.total_reward]) == msgspec.json.encode(
            [b.trace, b.summary, b.total_reward]
        )


# --- imperfect information ------------------------------------------------------------------------


@pytest.mark.parametrize("name", GAMES)
def test_the_opponents_cards_reach_the_policy_only_at_a_showdown(name: str) -> None:
    benchmark = CardGameBenchmark(name, profile="rule")
    game = benchmark.game
    showdowns = folds = 0
    for episode in benchmark.plan("validation", 1, 6):
        env = benchmark.make_environment(episode)
        policy = load_policy(benchmark.baseline_dir())(None)
        observation = env.reset()
        revealed: dict[int, list[str]] = {}  # hand -> the opponent's cards, as the Host knows them
        while True:
            state = env._state  # the Host's side of the table
            hidden = game.view(state, 1 - observation["seat"]).private
            revealed[observation["hand"]] = hidden
            assert set(observation) == OBSERVATION_KEYS
            assert observation["private_cards"] == game.view(state, observation["seat"]).private
            live = {k: v for k, v in observation.items() if k != "finished_hands"}
            for card in hidden:
                assert card not in json.dumps(live), (card, live)
            for hand in observation["finished_hands"]:
                if hand["showdown"]:
                    showdowns += 1
                    assert hand["opponent_cards"] and all(
                        c not in hand["my_cards"] for c in hand["opponent_cards"]
                    )
                    if hand["hand"] in revealed:  # the cards shown are the ones the opponent held
                        assert hand["opponent_cards"] == revealed[hand["hand"]]
                else:
                    folds += 1
                    assert hand["opponent_cards"] is None and "fold" in json.dumps(hand["actions"])
                    if hand["hand"] in revealed:
                        assert not set(revealed[hand["hand"]]) & set(json.dumps(hand).split('"'))
            result = env.step(policy.act(observation))
            observation = result.observation
            if result.terminated:
                break
        env.close()
    assert showdowns > 5 and folds > 5  # both kinds of hand end were seen


# --- the baseline against random -----------------------------------------------------------------


@pytest.mark.parametrize("name", GAMES)
def test_the_baseline_beats_random_on_the_assessment_split_as_recorded(name: str) -> None:
    benchmark = CardGameBenchmark(name)
    figures = measure(benchmark)
    assert (
        figures["baseline"]
        > figures["random"] + 2 * figures["random_std"] / figures["episodes"] ** 0.5
    )
    entry = catalog_entry(benchmark)
    assert entry is not None and entry.family == "cards" and entry.reference is not None
    # What the catalog records is exactly this measurement (deterministic, same seeds).
    assert (entry.reference.baseline, entry.reference.random) == (
        figures["baseline"],
        figures["random"],
    )
    assert (entry.reference.split, entry.reference.seed, entry.reference.episodes) == (
        "assessment",
        0,
        300,
    )
    assert benchmark.spec.metadata["reference_scores"] == figures


@pytest.mark.parametrize("name", GAMES)
def test_in_process_measurement_matches_evaluate(evaluator: Evaluator, name: str) -> None:
    benchmark = CardGameBenchmark(name)
    for program in (baseline(name), RANDOM_DIR):
        result = evaluate(evaluator, name, program, 3)
        make_policy = load_policy(program)
        ours = [
            play(benchmark, make_policy, e, policy_seed(benchmark, e))
            for e in benchmark.plan("assessment", 0, 3)
        ]
        assert [r.total_reward for r in result.records] == ours
        assert result.failures == 0


# --- illegal actions ------------------------------------------------------------------------------


def test_an_illegal_action_fails_the_episode_at_the_failure_score(
    evaluator: Evaluator, tmp_path: Path
) -> None:
    # Folding with nothing to call is not a legal action in OpenSpiel's poker.
    folder = write_program(
        tmp_path / "fold",
        "class P:\n    def act(self, o):\n        return 0\n\n"
        "def make_policy(c):\n    return P()\n",
    )
    result = evaluate(evaluator, "leduc", folder, 2)
    assert [r.status for r in result.records] == ["invalid_action", "invalid_action"]
    assert "not legal here; legal: 1 (call), 2 (raise)" in (result.records[0].failure or "")
    assert result.feedback.score == -260.0
    assert result.feedback.content["terminations"] == {"policy_invalid_action": 2}
    benchmark = CardGameBenchmark("leduc")
    for bad in (3, -1, True, "raise", 1.0):
        with pytest.raises(InvalidAction):
            benchmark.validate_action(bad)


# --- Feedback -------------------------------------------------------------------------------------


def test_feedback_has_round_summaries_and_a_bounded_replay(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, "holdem_limit", baseline("holdem_limit"), 4, profile="calling")
    content = result.feedback.content
    assert content["profile"] == "calling" and content["hands_per_episode"] == 20
    assert len(content["episodes"]) == 4 and len(content["round_summaries"]) == 3
    for episode, record in zip(content["episodes"], result.records, strict=True):
        assert episode["return"] == record.total_reward and episode["length"] == record.steps
        assert (
            episode["termination"]
            == {1: "won", -1: "lost", 0: "even"}[
                (record.total_reward > 0) - (record.total_reward < 0)
            ]
        )
        assert episode["hands_played"] == 20 and episode["hands_won"] + episode["hands_lost"] <= 20
        assert episode["opponent_folds"] == 0  # a calling station never folds
    assert sum(content["terminations"].values()) == 4
    assert content["domain"]["mean_hands_played"] == 20.0
    hand = content["round_summaries"][0]["hands"][0]
    assert set(hand) >= {"hand", "seat", "cards", "board", "betting", "pot", "result"}
    shown = [h for s in content["round_summaries"] for h in s["hands"] if "opponent_cards" in h]
    assert shown and all(h["my_hand"] and h["opponent_hand"] for h in shown)
    assert all(
        len(h["board"]) == 5 for h in shown
    )  # the calling station never folds: every showdown is on the river
    for h in shown:  # the better hand took the pot
        mine, theirs = CATEGORIES.index(h["my_hand"]), CATEGORIES.index(h["opponent_hand"])
        if mine != theirs:
            assert (h["result"] > 0) == (mine > theirs), h
    (replay,) = result.feedback.artifacts
    lines = [json.loads(line) for line in replay.data.splitlines()]
    assert replay.name == "replay.jsonl" and len(lines) == 80 and len(replay.data) <= 128 * 1024
    assert {line["episode"] for line in lines} == {0, 1, 2, 3}
    first = lines[0]
    assert first["betting"] == hand["betting"] and first["result"] == hand["result"]


def test_feedback_without_summaries_reads_the_trace() -> None:
    benchmark = CardGameBenchmark("leduc")
    episode = benchmark.plan("train", 0, 1)[0]
    frames = _match("leduc", 0)
    trace = [
        Step(action=1, reward=f[1], terminated=f[2], truncated=False, observation=f[0])
        for f in frames[1:-1]
    ]
    record = EpisodeRecord(
        spec=episode, policy_seed=1, status="ok", total_reward=float(frames[-1]["chips"]),
        steps=len(trace), initial_observation=frames[0], trace=trace,
    )  # fmt: skip
    content = benchmark.score([record]).content
    assert content["episodes"][0]["hands_played"] == 20
    assert [h["result"] for h in content["round_summaries"][0]["hands"]] == [
        h["result"] for h in frames[-1]["hands"]
    ]


# --- profiles and bad input -----------------------------------------------------------------------


def test_profiles_are_ordered_by_the_baselines_winnings() -> None:
    for name in GAMES:
        entry = catalog_entry(load_benchmark(name))
        assert entry is not None and entry.profile == "rule"
        assert [p.name for p in entry.profiles] == list(PROFILES[name])
        assert [p.difficulty for p in entry.profiles] == list(range(len(PROFILES[name])))
        winnings = [
            catalog_entry(load_benchmark(name, {"profile": p})).reference.baseline
            for p in PROFILES[name]
        ]  # type: ignore[union-attr]
        assert winnings == sorted(winnings, reverse=True)
        digests = {
            load_benchmark(name, {"profile": p}).spec.environment_digest for p in PROFILES[name]
        }
        assert len(digests) == len(PROFILES[name])


def test_bad_parameters_are_one_line_errors() -> None:
    with pytest.raises(
        BenchmarkError,
        match=r"unknown profile 'nope' \(profiles, easiest first: calling, random, rule\)",
    ):
        load_benchmark("holdem_limit", {"profile": "nope"})
    with pytest.raises(BenchmarkError, match="hands must be an integer from 1 to 1000"):
        load_benchmark("leduc", {"hands": "0"})
    with pytest.raises(BenchmarkError, match="hands must be an integer"):
        load_benchmark("leduc", {"hands": "many"})
    result = CliRunner().invoke(main, ["benchmarks", "show", "leduc", "--param", "profile=nope"])
    assert result.exit_code != 0 and "unknown profile 'nope'" in result.output
    assert len(result.output.strip().splitlines()) == 1


# --- an offline Run -------------------------------------------------------------------------------


def test_run_on_leduc_with_the_reference_agent_finishes_offline(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [
            sys.executable, "-c", "from evopolicygym.cli import main; main()",
            "run", "--benchmark", "leduc", "--agent", "reference", "--budget", "32",
            "--store", str(store), "--json",
        ],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_PROXY": "*", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"status": "finished"' in done.stdout
    assert '"benchmark_id": "leduc"' in done.stdout
