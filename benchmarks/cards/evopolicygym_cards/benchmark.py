"""The card games as Benchmarks: one seat against a fixed opponent, scored in chips won.

An Episode is a match of ``hands`` hands (seats alternating); its return is the chips the
policy's seat won over the match, negative when it lost. The score is the mean return
(maximize). A failed Episode (an illegal action, an exception, a timeout...) scores the
failure score: every hand lost at the game's largest possible loss, which no completed match
can fall below.

Feedback: per Episode the return (chips), why it ended (won, lost, even, or the policy's
failure), hands won and lost, showdowns and both seats' folds; the round summaries of the
first Episodes' hands (betting, pot, result, cards shown at a showdown); and ``replay.jsonl``,
a compact replay of the Episodes, one line per hand.
Both are read from the Environment's summary of each Episode (its finished hands, as the
policy's seat saw them once each ended) or, where none was recorded, from the Episodes' traces
(the observations the policy was given): only what was public to the policy's seat.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.benchmark import (
    Artifact,
    BenchmarkError,
    BenchmarkSpec,
    CatalogEntry,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
    InvalidAction,
    Profile,
    ReferenceScores,
    derive_seed,
    domain_summary,
    pick_profile,
    termination_of,
)
from evopolicygym_cards.environment import CardEnvironment, match_facts
from evopolicygym_cards.games import ACTION_NAMES, CALL, GAMES
from evopolicygym_cards.opponents import OPPONENT_DESCRIPTIONS, PROFILES

__all__ = ["BASELINES_DIR", "CardGameBenchmark", "holdem_limit", "leduc"]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
SPLITS = ("train", "validation", "assessment")
DEFAULT_PROFILE = "rule"
MAX_HANDS = 1000

SUMMARY_EPISODES = 3  # Episodes whose hands are summarised in the Feedback content
SUMMARY_HANDS = 20  # hands summarised per Episode
REPLAY_BYTES = 128 * 1024
OUTPUT_CHARS = 2000
FAILURE_CHARS = 500

OBSERVATION = {
    "game": "the game's id",
    "hand": "this hand's number in the match, from 0 (equals hands once the match is over)",
    "hands": "hands in the match",
    "done": "true on the last observation, after the match",
    "seat": (
        "the policy's OpenSpiel player this hand (0 or 1); seats alternate, "
        "the policy acting first in even hands"
    ),
    "private_cards": "the policy's own cards, e.g. ['Ks'] or ['Ah', '3c'] (rank then suit)",
    "board": "the public cards dealt so far",
    "round": "the betting round, from 0",
    "betting": (
        "this hand's actions so far, per round: [[actor, action], ...], actor me or opponent"
    ),
    "pot": "chips in the pot (both seats' contributions)",
    "to_call": "chips the policy must add to call (0: calling is a check)",
    "my_contribution": "chips the policy has put in this hand",
    "opponent_contribution": "chips the opponent has put in this hand",
    "legal_actions": "the actions allowed now (any other is an invalid action, a failed Episode)",
    "chips": "the policy's chips won so far in the match (before this hand)",
    "finished_hands": (
        "summaries of the hands that ended since the previous observation: hand, seat, "
        "my_cards, board, betting ('rc/rf': r raise, c call/check, f fold; rounds split by /), "
        "actions, pot, result (chips won), showdown, opponent_cards (only at a showdown)"
    ),
}


class CardGameBenchmark:
    """One card game, one opponent (its profile), a match of ``hands`` hands per Episode."""

    splits: tuple[str, ...] = SPLITS

    def __init__(self, game: str, *, profile: str | None = None, hands: int | None = None) -> None:
        if game not in GAMES:
            raise BenchmarkError(f"unknown card game {game!r}; expected one of {', '.join(GAMES)}")
        self.game = GAMES[game]
        profiles = _profiles(game)
        self.opponent = pick_profile(game, profiles, profile or DEFAULT_PROFILE).name
        if hands is None:
            hands = self.game.default_hands
        if type(hands) is not int or not 1 <= hands <= MAX_HANDS:
            raise BenchmarkError(
                f"{game}: hands must be an integer from 1 to {MAX_HANDS}, got {hands!r}"
            )
        self.hands = hands
        recorded = MEASURED.get((game, self.opponent, hands))
        self.catalog = CatalogEntry(
            family="cards",
            profiles=profiles,
            profile=self.opponent,
            reference=None
            if recorded is None
            else ReferenceScores(
                baseline=recorded["baseline"],
                random=recorded["random"],
                split=recorded["split"],
                seed=recorded["seed"],
                episodes=recorded["episodes"],
            ),
            deterministic=True,
        )
        self._spec: BenchmarkSpec | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spec": None}

    def __repr__(self) -> str:
        return (
            f"CardGameBenchmark({self.game.name!r}, profile={self.opponent!r}, hands={self.hands})"
        )

    @property
    def failure_score(self) -> float:
        """Every hand lost at the game's largest loss: no completed match scores less."""
        return float(self.hands * self.game.load().min_utility())

    @property
    def spec(self) -> BenchmarkSpec:
        if self._spec is None:
            spiel = self.game.load()
            profiles = PROFILES[self.game.name]
            metadata: dict[str, Any] = {
                "library": "OpenSpiel",
                "openspiel_game": self.game.game_string,
                "rules": self.game.rules,
                "action": (
                    "0 fold, 1 call (a check when to_call is 0), "
                    "2 raise (a bet when nothing is bet)"
                ),
                "action_names": {str(a): name for a, name in ACTION_NAMES.items()},
                "reward": (
                    "chips won (negative: lost) in the hands that ended since the previous step; "
                    "the Episode's return is the match's chips"
                ),
                "big_blind": self.game.big_blind,
                "opponent": OPPONENT_DESCRIPTIONS[self.opponent],
                "family": "cards",
                "profile": self.opponent,
                "profiles": list(profiles),
                "difficulty": profiles.index(self.opponent),
                "imperfect_information": (
                    "the opponent's cards are shown only in a finished hand's summary, and only "
                    "when that hand went to a showdown"
                ),
                "deterministic": True,
            }
            recorded = MEASURED.get((self.game.name, self.opponent, self.hands))
            if recorded is not None:
                # The catalog's reference scores, with the spread of each measurement.
                metadata["reference_scores"] = recorded
            self._spec = BenchmarkSpec(
                id=self.game.name,
                description=(
                    f"{self.game.description} Profile {self.opponent}: "
                    f"{OPPONENT_DESCRIPTIONS[self.opponent]}"
                ),
                observation_space={"type": "json", "fields": OBSERVATION},
                action_space={"type": "discrete", "n": 3, "start": 0},
                max_episode_steps=self.hands * spiel.max_game_length(),
                primary_metric="mean_return",
                score_direction="maximize",
                failure_score=self.failure_score,
                metadata=metadata,
                environment_parameters={
                    "game": self.game.name,
                    "profile": self.opponent,
                    "hands": self.hands,
                },
            )
        return self._spec

    def baseline_dir(self) -> Path:
        return BASELINES_DIR / self.game.name

    def plan(self, split: str, seed: int, count: int) -> list[EpisodeSpec]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(self.splits)}")
        return [
            EpisodeSpec(
                split=split, index=i, seed=derive_seed("episode", self.game.name, split, seed, i)
            )
            for i in range(count)
        ]

    def make_environment(self, episode: EpisodeSpec) -> CardEnvironment:
        return CardEnvironment(self.game, self.opponent, self.hands, episode.seed)

    def validate_action(self, action: Any) -> int:
        # Whether it is legal at this decision is the Environment's check (InvalidAction too).
        if type(action) is int and action in ACTION_NAMES:
            return action
        raise InvalidAction(
            f"action must be an int 0 (fold), 1 (call) or 2 (raise), got {_short(action)}"
        )

    def sample_action(self, rng: random.Random) -> int:
        """Call (a check when nothing is owed): the one action legal at every decision, so a
        random rollout never plays an illegal one. A policy random over the legal actions is
        ``baselines/random``."""
        return CALL

    def episode_return(self, record: EpisodeRecord) -> float:
        floor = self.failure_score
        if record.status != "ok":
            return floor
        return max(float(record.total_reward), floor)

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        returns = [self.episode_return(r) for r in records]
        failures: dict[str, int] = {}
        terminations: dict[str, int] = {}
        episodes = []
        summarised: list[dict[str, Any]] = []
        replay: list[bytes] = []
        replay_size = 0
        for record, ret in zip(records, returns, strict=True):
            if record.status != "ok":
                failures[record.status] = failures.get(record.status, 0) + 1
            hands = _hands_of(record)
            termination = termination_of(record)
            terminations[termination] = terminations.get(termination, 0) + 1
            facts = match_facts(hands)
            del facts["chips"]  # the Episode's chips are its return, failure scoring included
            episodes.append(
                {
                    "index": record.spec.index,
                    "status": record.status,
                    "termination": termination,
                    # As in every family: the Episode's return (here its chips, the failure
                    # score when it failed) and length (the policy's decisions).
                    "return": ret,
                    "length": record.steps,
                    **facts,
                    "failure": None if record.failure is None else record.failure[:FAILURE_CHARS],
                    "output_tail": record.stderr_tail[-OUTPUT_CHARS:],
                }
            )
            if len(summarised) < SUMMARY_EPISODES and hands:
                summarised.append(
                    {
                        "index": record.spec.index,
                        "hands": [_round_summary(h) for h in hands[:SUMMARY_HANDS]],
                    }
                )
            for hand in hands:
                line = msgspec.json.encode({"episode": record.spec.index, **_replay_line(hand)})
                if replay_size + len(line) + 1 > REPLAY_BYTES:
                    break
                replay.append(line)
                replay_size += len(line) + 1
        mean = statistics.fmean(returns) if returns else 0.0
        played = sum(e["hands_played"] for e in episodes if e["status"] == "ok")
        content: dict[str, Any] = {
            "episodes": episodes,
            "mean_return": mean,
            "std_return": statistics.pstdev(returns) if returns else 0.0,
            "min_return": min(returns) if returns else 0.0,
            "max_return": max(returns) if returns else 0.0,
            "hands_per_episode": self.hands,
            "chips_per_hand": mean / self.hands,
            "big_blinds_per_hand": mean / self.hands / self.game.big_blind,
            "profile": self.opponent,
            "failures": failures,
            "failure_score": self.failure_score,
            "terminations": terminations,
            # won_rate, mean_hands_won, mean_showdowns, mean_my_folds... over completed Episodes.
            "domain": domain_summary(records) if any(r.summary for r in records) else {},
            "hands_won_rate": (
                sum(e["hands_won"] for e in episodes if e["status"] == "ok") / played
                if played
                else 0.0
            ),
            "round_summaries": summarised,
        }
        artifacts: tuple[Artifact, ...] = ()
        if replay:
            artifacts = (
                Artifact(
                    name="replay.jsonl",
                    media_type="application/jsonl",
                    data=b"\n".join(replay) + b"\n",
                    retention="bulk",
                ),
            )
        return Feedback(score=mean, content=content, artifacts=artifacts)


def _hands_of(record: EpisodeRecord) -> list[dict[str, Any]]:
    """The finished hands' summaries: from the Environment's summary of the Episode where the
    Host recorded one, else from the observations the policy was given (its trace), in order."""
    hands = record.summary.get("hands")
    if isinstance(hands, list):
        return [h for h in hands if isinstance(h, dict)]
    observations = [record.initial_observation, *(step.observation for step in record.trace or ())]
    found: list[dict[str, Any]] = []
    for observation in observations:
        if isinstance(observation, dict):
            found.extend(h for h in observation.get("finished_hands") or () if isinstance(h, dict))
    return found


def _round_summary(hand: dict[str, Any]) -> dict[str, Any]:
    summary = {
        "hand": hand["hand"],
        "seat": hand["seat"],
        "cards": hand["my_cards"],
        "board": hand["board"],
        "betting": hand["betting"],
        "pot": hand["pot"],
        "result": hand["result"],
    }
    if hand["showdown"]:
        summary["opponent_cards"] = hand["opponent_cards"]
        for key in ("my_hand", "opponent_hand"):
            if key in hand:
                summary[key] = hand[key]
    return summary


def _replay_line(hand: dict[str, Any]) -> dict[str, Any]:
    line = {k: hand[k] for k in ("hand", "seat", "my_cards", "board", "betting", "pot", "result")}
    line["opponent_cards"] = hand["opponent_cards"]
    return line


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hands(value: Any) -> int | None:
    """``--param hands=30`` arrives as a string."""
    if value is None or type(value) is int:
        return value
    try:
        return int(str(value))
    except ValueError:
        raise BenchmarkError(f"hands must be an integer, got {value!r}") from None


def leduc(profile: str | None = None, hands: int | str | None = None) -> CardGameBenchmark:
    """Leduc poker; ``--param profile=calling|random|rule|equilibrium --param hands=N``."""
    return CardGameBenchmark("leduc", profile=profile, hands=_hands(hands))


def holdem_limit(profile: str | None = None, hands: int | str | None = None) -> CardGameBenchmark:
    """Heads-up limit Texas Hold'em; ``--param profile=calling|random|rule --param hands=N``."""
    return CardGameBenchmark("holdem_limit", profile=profile, hands=_hands(hands))


def _profiles(game: str) -> tuple[Profile, ...]:
    return tuple(
        Profile(
            name=name,
            difficulty=i,
            parameters={"opponent": name},
            description=OPPONENT_DESCRIPTIONS[name],
        )
        for i, name in enumerate(PROFILES[game])
    )


# The baseline program's and a uniformly random legal policy's mean chips per Episode on the
# assessment split, measured by ``python -m evopolicygym_cards.measure`` (in-process, the
# same Episodes and policy seeds for both); keyed by (game, opponent, hands).
MEASURED: dict[tuple[str, str, int], dict[str, Any]] = {
    ("leduc", "calling", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 21.4433,
        "baseline_std": 12.3405,
        "random": -0.2967,
        "random_std": 17.9202,
    },
    ("leduc", "random", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 16.0833,
        "baseline_std": 16.5147,
        "random": 0.93,
        "random_std": 20.6168,
    },
    ("leduc", "rule", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 1.03,
        "baseline_std": 11.0425,
        "random": -16.84,
        "random_std": 17.2374,
    },
    ("leduc", "equilibrium", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": -0.4,
        "baseline_std": 12.8294,
        "random": -12.7533,
        "random_std": 19.2603,
    },
    ("holdem_limit", "calling", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 131.9,
        "baseline_std": 120.2846,
        "random": -15.9,
        "random_std": 159.3969,
    },
    ("holdem_limit", "random", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 75.3667,
        "baseline_std": 129.5629,
        "random": -2.3167,
        "random_std": 149.7555,
    },
    ("holdem_limit", "rule", 20): {
        "split": "assessment",
        "seed": 0,
        "episodes": 300,
        "baseline": 29.4167,
        "baseline_std": 133.5742,
        "random": -16.6,
        "random_std": 108.6145,
    },
}
