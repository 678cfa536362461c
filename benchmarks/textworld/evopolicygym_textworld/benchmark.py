"""The TextWorld games as Benchmarks: a policy types commands in a generated text adventure.

Three tasks, each one of TextWorld's challenge generators at three difficulty profiles:

- ``textworld_coin``: coin collector (``tw-coin_collector``): find the coin at the far end
  of a chain of rooms; harder levels add dead-end rooms along the way;
- ``textworld_treasure``: treasure hunter (``tw-treasure_hunter``): take the object the
  objective names, and no other (taking a wrong one loses); harder levels add doors,
  containers, locks and distractors;
- ``textworld_cooking``: the cooking games (``tw-cooking``): read the cookbook, gather the
  ingredients, cut and cook them as it says (cooking wrongly loses), prepare the meal and eat it.

Every Episode is a new game, generated from its seed at the profile's settings and cached
(see ``games``). The observation is a dict of text and numbers (``OBSERVATION``); the action
is one command, a string whose first word is one of ``VERBS`` (anything else is an invalid
action, which fails the Episode); a command the game does not understand or allow is played
and answered, and counted as inadmissible in the Feedback. With ``admissible=true`` (the
default) the observation lists the commands the game accepts now, as most TextWorld agents are
given; ``admissible=false`` hides them, a harder parsing task.

A step's reward is the points its command earned over the game's maximum, so an Episode's
return is the share of the points it scored, 0 to 1 (1: won). A failed Episode scores 0.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.benchmark import (
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
from evopolicygym_textworld.environment import TextWorldEnvironment, normalise_command

__all__ = [
    "BASELINES_DIR",
    "DEFAULT_PROFILE",
    "PROFILES",
    "REFERENCES",
    "VERBS",
    "TextWorldBenchmark",
    "coin",
    "cooking",
    "treasure",
]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
SPLITS = ("train", "validation", "assessment")
DEFAULT_PROFILE = "medium"
MAX_COMMAND_CHARS = 200
FAILURE_CHARS = 500
OUTPUT_CHARS = 2000

# The first word of a command: TextWorld's verbs in these games, and the bare directions.
DIRECTIONS = ("north", "south", "east", "west")
VERBS = (
    "look",
    "inventory",
    "go",
    *DIRECTIONS,
    "examine",
    "take",
    "drop",
    "put",
    "insert",
    "open",
    "close",
    "lock",
    "unlock",
    "eat",
    "drink",
    "cook",
    "slice",
    "dice",
    "chop",
    "prepare",
)
# A random command's object (``sample_action``): things most of these games have, and where
# to go.
OBJECTS = (
    *DIRECTIONS,
    "coin",
    "door",
    "gate",
    "key",
    "chest",
    "box",
    "table",
    "cookbook",
    "knife",
    "fridge",
    "stove",
    "oven",
    "meal",
)
_INTRANSITIVE = ("look", "inventory", *DIRECTIONS)

OBSERVATION = {
    "text": (
        "the game's answer to the last command (after reset: the objective and the first room)"
    ),
    "description": "what 'look' would say of the current room; it starts with '-= Room =-'",
    "inventory": "what 'inventory' would say",
    "objective": "the game's objective, as given at the start",
    "score": "points scored so far",
    "max_score": "the game's points in all",
    "moves": "commands typed so far this Episode",
    "admissible_commands": (
        "(with admissible=true) the commands the game accepts now, sorted; others are played "
        "and answered, and counted as inadmissible"
    ),
}

_COOKING = {"drop": False, "split": None}
# Each task: (challenge, step limit, options) per profile, easiest first.
_TABLE: dict[str, tuple[str, tuple[tuple[str, int, dict[str, Any], str], ...]]] = {
    "textworld_coin": (
        "tw-coin_collector",
        (
            ("easy", 50, {"level": 5}, "a chain of 5 rooms (level 5)"),
            (
                "medium",
                100,
                {"level": 110},
                "a chain of 10 rooms with a dead-end room off each (level 110, 20 rooms)",
            ),
            (
                "hard",
                200,
                {"level": 215},
                "a chain of 15 rooms with dead ends placed at random (level 215, 45 rooms)",
            ),
        ),
    ),
    "textworld_treasure": (
        "tw-treasure_hunter",
        (
            ("easy", 50, {"level": 5}, "5 rooms, no doors (level 5)"),
            ("medium", 100, {"level": 15}, "10 rooms, closed doors and containers (level 15)"),
            ("hard", 200, {"level": 25}, "20 rooms, locked doors and containers (level 25)"),
        ),
    ),
    "textworld_cooking": (
        "tw-cooking",
        (
            (
                "easy",
                50,
                {"recipe": 1, "take": 1, "go": 1, "open": False, "cook": False, "cut": False},
                "one ingredient, one room",
            ),
            (
                "medium",
                100,
                {"recipe": 2, "take": 2, "go": 6, "open": True, "cook": False, "cut": True},
                "two ingredients to find and cut, 6 rooms, things to open",
            ),
            (
                "hard",
                200,
                {"recipe": 3, "take": 3, "go": 9, "open": True, "cook": True, "cut": True},
                "three ingredients to find, cut and cook, 9 rooms, things to open",
            ),
        ),
    ),
}

PROFILES: dict[str, tuple[Profile, ...]] = {
    task: tuple(
        Profile(
            name=name,
            difficulty=i,
            parameters={"challenge": challenge, "options": options, "max_steps": steps},
            description=text,
        )
        for i, (name, steps, options, text) in enumerate(rows)
    )
    for task, (challenge, rows) in _TABLE.items()
}
DESCRIPTIONS = {
    "textworld_coin": "Find and take the coin in a generated house of rooms, typing commands.",
    "textworld_treasure": (
        "Take the object the objective names in a generated world of rooms, doors and "
        "containers, and nothing else: a wrong object loses the game."
    ),
    "textworld_cooking": (
        "Read the cookbook, gather the recipe's ingredients in a generated house, cut and cook "
        "them as it says, prepare the meal and eat it."
    ),
}
# Measured on the default profile (admissible commands shown) with evaluate(): the assessment
# split, seed 0, 32 Episodes (games), the baseline program against baselines/random (a random
# admissible command each step). Mean return (standard error): coin 1.0 (0) against 0.125
# (0.059), treasure 1.0 (0) against 0.25 (0.078), cooking 1.0 (0) against 0.1823 (0.022).
REFERENCES: dict[str, ReferenceScores] = {
    name: ReferenceScores(baseline=ours, random=random, split="assessment", seed=0, episodes=32)
    for name, ours, random in (
        ("textworld_coin", 1.0, 0.125),
        ("textworld_treasure", 1.0, 0.25),
        ("textworld_cooking", 1.0, 0.1823),
    )
}


class TextWorldBenchmark:
    """One TextWorld task at one profile; each Episode is a game made from its seed."""

    splits: tuple[str, ...] = SPLITS

    def __init__(self, task: str, *, profile: str | None = None, admissible: bool = True) -> None:
        if task not in PROFILES:
            raise BenchmarkError(f"unknown TextWorld task {task!r}")
        self.task = task
        chosen = pick_profile(task, PROFILES[task], profile or DEFAULT_PROFILE)
        self.profile = chosen.name
        self.challenge: str = chosen.parameters["challenge"]
        self.options: dict[str, Any] = dict(chosen.parameters["options"])
        self.max_steps: int = chosen.parameters["max_steps"]
        self.admissible = admissible
        # The frontier suite's member (and what the references measured): the default profile
        # with the admissible commands shown.
        default = self.profile == DEFAULT_PROFILE and admissible
        self.catalog = CatalogEntry(
            family="textworld",
            suites=("frontier",) if default else (),
            profiles=PROFILES[task],
            profile=self.profile,
            reference=REFERENCES.get(task) if default else None,
        )
        self._spec: BenchmarkSpec | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spec": None}

    def __repr__(self) -> str:
        return (
            f"TextWorldBenchmark({self.task!r}, profile={self.profile!r}, "
            f"admissible={self.admissible})"
        )

    @property
    def spec(self) -> BenchmarkSpec:
        if self._spec is None:
            metadata: dict[str, Any] = {
                "library": "TextWorld",
                "challenge": self.challenge,
                "challenge_options": self.options,
                "family": "textworld",
                "profile": self.profile,
                "difficulty": self.catalog.difficulty,
                "action": (
                    "one command, e.g. 'go north', 'take coin', 'open fridge', "
                    "'dice carrot with knife'; its first word one of the verbs"
                ),
                "reward": (
                    "points the command earned / the game's points in all; the Episode's "
                    "return is the share of the points scored (1: won)"
                ),
                "terminations": "won, lost, truncated (the step limit)",
                "admissible": self.admissible,
                "deterministic": True,
            }
            if self.catalog.reference is not None:
                metadata["reference_scores"] = msgspec.to_builtins(self.catalog.reference)
            self._spec = BenchmarkSpec(
                id=self.task,
                description=f"{DESCRIPTIONS[self.task]} Profile {self.profile}: "
                + next(p.description for p in PROFILES[self.task] if p.name == self.profile)
                + ".",
                observation_space={
                    "type": "json",
                    "fields": {
                        k: v
                        for k, v in OBSERVATION.items()
                        if self.admissible or k != "admissible_commands"
                    },
                },
                action_space={
                    "type": "text",
                    "max_length": MAX_COMMAND_CHARS,
                    "verbs": list(VERBS),
                    "objects": list(OBJECTS),
                    "intransitive": list(_INTRANSITIVE),
                    "choices": "admissible_commands" if self.admissible else None,
                },
                max_episode_steps=self.max_steps,
                primary_metric="mean_return",
                score_direction="maximize",
                failure_score=0.0,
                metadata=metadata,
                environment_parameters={
                    "challenge": self.challenge,
                    "options": self.options,
                    "profile": self.profile,
                    "max_steps": self.max_steps,
                    "admissible": self.admissible,
                },
            )
        return self._spec

    def baseline_dir(self) -> Path:
        return BASELINES_DIR / "agent"

    def plan(self, split: str, seed: int, count: int) -> list[EpisodeSpec]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(self.splits)}")
        return [
            EpisodeSpec(
                split=split, index=i, seed=derive_seed("episode", self.task, split, seed, i)
            )
            for i in range(count)
        ]

    def game_options(self, episode: EpisodeSpec) -> tuple[dict[str, Any], int]:
        """The challenge options and TextWorld seed of the Episode's game."""
        options = dict(self.options)
        if self.challenge == "tw-cooking":
            options.update(_COOKING, recipe_seed=(episode.seed >> 32) % 2**31)
        return options, episode.seed % 2**32  # TextWorld seeds NumPy: 32 bits

    def make_environment(self, episode: EpisodeSpec) -> TextWorldEnvironment:
        options, seed = self.game_options(episode)
        return TextWorldEnvironment(
            self.challenge, options, seed, max_steps=self.max_steps, admissible=self.admissible
        )

    def validate_action(self, action: Any) -> str:
        """A command: a str of printable ASCII, at most MAX_COMMAND_CHARS, whose first word is
        one of VERBS; returned lowercased with single spaces (as the game reads it)."""
        if type(action) is not str:
            raise InvalidAction(f"a command is a str, got {type(action).__name__}")
        if len(action) > MAX_COMMAND_CHARS:
            raise InvalidAction(f"a command has at most {MAX_COMMAND_CHARS} characters")
        if not action.isascii() or not all(c.isprintable() or c == " " for c in action):
            raise InvalidAction(f"a command is printable ASCII, got {action[:60]!r}")
        command = normalise_command(action)
        verb = command.split(" ", 1)[0]
        if verb not in VERBS:
            raise InvalidAction(
                f"a command starts with one of {', '.join(VERBS)}; got {command[:60]!r}"
            )
        return command

    def sample_action(self, rng: random.Random) -> str:
        """A random verb, alone where it takes no object, else with a random one of OBJECTS
        (with no game state at hand; baselines/random plays a random admissible command when
        the observation lists them, and this otherwise)."""
        verb = rng.choice(VERBS)
        if verb in _INTRANSITIVE:
            return verb
        return f"{verb} {rng.choice(OBJECTS)}"

    def episode_return(self, record: EpisodeRecord) -> float:
        if record.status != "ok":
            return 0.0
        return min(1.0, max(0.0, float(record.total_reward)))

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        returns = [self.episode_return(r) for r in records]
        failures: dict[str, int] = {}
        terminations: dict[str, int] = {}
        episodes = []
        for record, ret in zip(records, returns, strict=True):
            if record.status != "ok":
                failures[record.status] = failures.get(record.status, 0) + 1
            termination = termination_of(record)
            terminations[termination] = terminations.get(termination, 0) + 1
            row: dict[str, Any] = {
                "index": record.spec.index,
                "status": record.status,
                "termination": termination,
                "return": ret,
                "length": record.steps,
                "failure": None if record.failure is None else record.failure[:FAILURE_CHARS],
                "output_tail": record.stderr_tail[-OUTPUT_CHARS:],
            }
            fields = {k: v for k, v in record.summary.items() if k != "termination"}
            if fields:
                row["summary"] = fields
            episodes.append(row)
        mean = statistics.fmean(returns) if returns else 0.0
        won = sum(1 for r in records if r.status == "ok" and r.summary.get("won") is True)
        content: dict[str, Any] = {
            "episodes": episodes,
            "mean_return": mean,
            "std_return": statistics.pstdev(returns) if returns else 0.0,
            "min_return": min(returns) if returns else 0.0,
            "max_return": max(returns) if returns else 0.0,
            "mean_length": statistics.fmean(r.steps for r in records) if records else 0.0,
            "won_rate": won / len(records) if records else 0.0,
            "profile": self.profile,
            "failures": failures,
            "failure_score": 0.0,
            "terminations": dict(sorted(terminations.items())),
            # won_rate, lost_rate, mean_points, mean_moves, mean_inadmissible_commands...
            "domain": domain_summary(records),
        }
        return Feedback(score=mean, content=content)


def _flag(value: Any, name: str) -> bool:
    """``--param admissible=false`` arrives as a string."""
    if type(value) is bool:
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise BenchmarkError(f"{name} is true or false, got {value!r}")


def coin(profile: str | None = None, admissible: bool | str = True) -> TextWorldBenchmark:
    """Coin collector; ``--param profile=easy|medium|hard --param admissible=true|false``."""
    return TextWorldBenchmark(
        "textworld_coin", profile=profile, admissible=_flag(admissible, "admissible")
    )


def treasure(profile: str | None = None, admissible: bool | str = True) -> TextWorldBenchmark:
    """Treasure hunter; ``--param profile=easy|medium|hard --param admissible=true|false``."""
    return TextWorldBenchmark(
        "textworld_treasure", profile=profile, admissible=_flag(admissible, "admissible")
    )


def cooking(profile: str | None = None, admissible: bool | str = True) -> TextWorldBenchmark:
    """Cooking games; ``--param profile=easy|medium|hard --param admissible=true|false``."""
    return TextWorldBenchmark(
        "textworld_cooking", profile=profile, admissible=_flag(admissible, "admissible")
    )
