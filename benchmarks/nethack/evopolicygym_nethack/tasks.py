"""The NetHack family's tasks: the full game through NLE (``nethack``) and eight MiniHack
tasks, each with difficulty profiles, domain Feedback and a rule-bot baseline.

The policy sees a dict: ``glyphs`` (21 x 79 int16, NetHack's glyph of each map cell),
``chars`` and ``colors`` (21 x 79 uint8, the map as the terminal draws it), ``blstats``
(27 int64, named in the spec's ``blstats`` metadata), ``message`` (the top line, text),
``inventory`` ([{letter, text, class}], class NetHack's object class: 2 weapon, 3 armor,
4 ring, 5 amulet, 6 tool, 7 food, 8 potion, 9 scroll, 10 spellbook, 11 wand, 12 coin, 13
gem, 14 rock) and ``tty_chars`` (24 x 80 uint8, the whole terminal). Actions are integer
indexes into the task's key list; the spec's ``actions`` metadata names each one as
``'<key>: <name>'`` and ``keys`` gives the character code NetHack receives, so a policy
can look an action up by its key (``e`` eat, ``s`` search, ``>`` go down, ...).

Every Episode's game is seeded from the Episode seed (both NetHack generators, reseeding
off, moon phase and the like derived from them, never from the clock), so an Episode
replays exactly.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import gymnasium
from nle import nethack

from evopolicygym.benchmark import (
    CatalogEntry,
    GymnasiumBenchmark,
    Profile,
    ReferenceScores,
    VideoOptions,
    pick_profile,
)
from evopolicygym_nethack.envs import (
    BLSTATS,
    OBSERVATION_KEYS,
    action_names,
    nethack_full_game,
    wrap_minihack,
)
from evopolicygym_nethack.render import frame_later
from evopolicygym_nethack.trackers import MiniHackTracker, NetHackTracker

# Every Submission's Feedback carries videos of its best and worst Episode (the terminal as
# it was, at most 96 frames spread over the Episode): a long game is hard to read from numbers.
VIDEOS = VideoOptions()

with warnings.catch_warnings():
    # minihack imports pkg_resources, which warns on import.
    warnings.simplefilter("ignore")
    import minihack  # noqa: F401 (registers the MiniHack environments)

__all__ = [
    "BASELINES_DIR",
    "DEFAULT_PROFILES",
    "PROFILES",
    "REFERENCES",
    "corridor",
    "eat",
    "keyroom",
    "lavacross",
    "mazewalk",
    "nethack_game",
    "river",
    "room",
    "wod",
]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
BOT = str(BASELINES_DIR / "rulebot")
NETHACK_STEPS = 10_000
MINIHACK_PENALTY = 0.01  # MiniHack's reward for a step on which the game clock stands still


def _rows(rows: tuple[tuple[str, str, str], ...]) -> tuple[Profile, ...]:
    return tuple(
        Profile(name=name, difficulty=i, parameters={"env_id": env_id}, description=text)
        for i, (name, env_id, text) in enumerate(rows)
    )


_CHARACTERS = (
    ("valkyrie", "val-dwa-law-fem", "a dwarvish valkyrie, the strongest start"),
    ("samurai", "sam-hum-law-mal", "a human samurai"),
    ("monk", "mon-hum-neu-mal", "a human monk, NLE's default character"),
    ("wizard", "wiz-elf-cha-mal", "an elven wizard, frail but with spells"),
    ("tourist", "tou-hum-neu-mal", "a human tourist, the weakest start"),
)
PROFILES: dict[str, tuple[Profile, ...]] = {
    "nethack": tuple(
        Profile(
            name=name,
            difficulty=i,
            parameters={"env_id": "NetHackScore-v0", "character": character},
            description=text,
        )
        for i, (name, character, text) in enumerate(_CHARACTERS)
    ),
    "minihack_room": _rows(
        (
            ("5x5", "MiniHack-Room-5x5-v0", "a lit 5x5 room"),
            ("15x15", "MiniHack-Room-15x15-v0", "a lit 15x15 room"),
            ("random", "MiniHack-Room-Random-15x15-v0", "random start and stairs"),
            ("dark", "MiniHack-Room-Dark-15x15-v0", "an unlit room"),
            ("monster", "MiniHack-Room-Monster-15x15-v0", "monsters attack"),
            ("trap", "MiniHack-Room-Trap-15x15-v0", "hidden teleportation traps"),
            ("ultimate", "MiniHack-Room-Ultimate-15x15-v0", "dark, monsters and traps"),
        )
    ),
    "minihack_corridor": _rows(
        tuple(
            (f"R{n}", f"MiniHack-Corridor-R{n}-v0", f"{n} rooms joined by corridors")
            for n in (2, 3, 5)
        )
    ),
    "minihack_mazewalk": _rows(
        tuple(
            (size, f"MiniHack-MazeWalk-{size}-v0", f"a {size} maze")
            for size in ("9x9", "15x15", "45x19")
        )
    ),
    "minihack_river": _rows(
        (
            ("narrow", "MiniHack-River-Narrow-v0", "a narrow river"),
            ("river", "MiniHack-River-v0", "a river two squares wide"),
            ("monster", "MiniHack-River-Monster-v0", "a river with monsters in it"),
            ("lava", "MiniHack-River-Lava-v0", "a river beside lava"),
            ("monster-lava", "MiniHack-River-MonsterLava-v0", "monsters and lava"),
        )
    ),
    "minihack_keyroom": _rows(
        (
            ("fixed-S5", "MiniHack-KeyRoom-Fixed-S5-v0", "fixed key and door, size 5"),
            ("S5", "MiniHack-KeyRoom-S5-v0", "random key and door, size 5"),
            ("S15", "MiniHack-KeyRoom-S15-v0", "random key and door, size 15"),
            ("dark-S5", "MiniHack-KeyRoom-Dark-S5-v0", "an unlit room, size 5"),
            ("dark-S15", "MiniHack-KeyRoom-Dark-S15-v0", "an unlit room, size 15"),
        )
    ),
    "minihack_lavacross": _rows(
        (
            (
                "potion-inv",
                "MiniHack-LavaCross-Levitate-Potion-Inv-Full-v0",
                "a potion of levitation in the inventory",
            ),
            (
                "ring-inv",
                "MiniHack-LavaCross-Levitate-Ring-Inv-Full-v0",
                "a ring of levitation in the inventory",
            ),
            (
                "potion-pickup",
                "MiniHack-LavaCross-Levitate-Potion-Pickup-Full-v0",
                "a potion of levitation on the floor",
            ),
            (
                "levitate",
                "MiniHack-LavaCross-Levitate-Full-v0",
                "a potion, ring or boots of levitation on the floor",
            ),
            ("full", "MiniHack-LavaCross-Full-v0", "levitation or frost, on the floor"),
        )
    ),
    "minihack_wod": _rows(
        tuple(
            (level.lower(), f"MiniHack-WoD-{level}-Full-v0", text)
            for level, text in (
                ("Easy", "the wand in hand, the monster in line"),
                ("Medium", "the wand on the floor"),
                ("Hard", "the wand in a room off the corridor"),
                ("Pro", "a larger level and more monsters"),
            )
        )
    ),
    "minihack_eat": _rows(
        (
            ("fixed", "MiniHack-Eat-Fixed-v0", "the same food item every time"),
            ("random", "MiniHack-Eat-v0", "a random food item"),
            ("distractions", "MiniHack-Eat-Distr-v0", "food among other items"),
        )
    ),
}
DEFAULT_PROFILES = {
    "nethack": "monk",
    "minihack_room": "monster",
    "minihack_corridor": "R3",
    "minihack_mazewalk": "15x15",
    "minihack_river": "river",
    "minihack_keyroom": "S5",
    "minihack_lavacross": "full",
    "minihack_wod": "easy",
    "minihack_eat": "random",
}
DESCRIPTIONS = {
    "nethack": (
        "Play the full game of NetHack (NLE's NetHackScore, the whole keyboard): descend, "
        "fight, eat and survive. The return is the in-game score gained (no time penalty), "
        f"at least 0; an Episode ends at death or after {NETHACK_STEPS} steps."
    ),
    "minihack_room": "Reach the stairs down of a MiniHack room.",
    "minihack_corridor": "Find the stairs down through corridors joining rooms.",
    "minihack_mazewalk": "Find the stairs down of a maze seen only where the hero has been.",
    "minihack_river": (
        "Push boulders into the river to build a crossing and reach the stairs beyond it."
    ),
    "minihack_keyroom": (
        "Pick up the key, unlock the room's door with it (apply) and reach the stairs inside."
    ),
    "minihack_lavacross": (
        "Cross the lava to the stairs: levitate (potion, ring, boots) or freeze it (wand "
        "of cold, frost horn) with the item found nearby."
    ),
    "minihack_wod": "Kill the monster with the wand of death, zapped in its direction.",
    "minihack_eat": "Find the food item in the room and eat it.",
}
# Measured on the default profile with evaluate(): the assessment split, seed 0, 32 Episodes,
# the rule bot against the kernel's uniform-random program (standard errors in comments).
REFERENCES: dict[str, ReferenceScores] = {
    name: ReferenceScores(baseline=ours, random=random, split="assessment", seed=0, episodes=32)
    for name, ours, random in (
        # 116.4 and 3.7; the bot dies in 29 of 32 games (reaching Dlvl 3 to 6), random in 31
        # (it quits, prays or starves).
        ("nethack", 1026.3438, 8.5312),
        ("minihack_room", 0.9688, 0.2853),  # 0.031, 0.097
        ("minihack_corridor", 0.8972, -1.9925),  # 0.068, 0.215
        ("minihack_mazewalk", 1.0, -4.8616),  # 0.0, 0.492
        ("minihack_river", -0.0013, -0.4522),  # 0.098, 0.021: 8 of 32 crossings
        ("minihack_keyroom", -0.4716, -1.0316),  # 0.124, 0.041: 7 of 32 unlocked
        ("minihack_lavacross", -0.2047, -1.4125),  # 0.295, 0.162: 21 of 32 crossed
        ("minihack_wod", 0.9738, -0.4475),  # 0.002, 0.015
        ("minihack_eat", 0.99, -2.2972),  # 0.0, 0.009
    )
}


@functools.cache
def _limits(env_id: str) -> tuple[int, list[str], list[int]]:
    """A MiniHack task's own step limit, and its actions' names and keys."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gymnasium.make(env_id)
    try:
        base = env.unwrapped
        actions = tuple(base.actions)  # type: ignore[attr-defined]
        return int(base._max_episode_steps), action_names(actions), [int(a) for a in actions]  # type: ignore[attr-defined]
    finally:
        env.close()


def _metadata(env_id: str, names: list[str], keys: list[int], reward: str) -> dict[str, Any]:
    return {
        "observation": (
            "{glyphs: 21x79 int16, chars: 21x79 uint8, colors: 21x79 uint8, blstats: 27 "
            "int64, message: str, inventory: [{letter, text, class}], tty_chars: 24x80 uint8}; "
            "map rows are y, columns x; blstats fields in `blstats`"
        ),
        "blstats": list(BLSTATS),
        "actions": names,
        "keys": keys,
        "reward": reward,
        "env_id": env_id,
    }


def _catalog(benchmark_id: str, chosen: Profile) -> CatalogEntry:
    is_default = chosen.name == DEFAULT_PROFILES[benchmark_id]
    return CatalogEntry(
        family="nethack",
        suites=("frontier",) if is_default else (),
        profiles=PROFILES[benchmark_id],
        profile=chosen.name,
        reference=REFERENCES[benchmark_id] if is_default else None,
    )


def nethack_game(profile: str | None = None) -> GymnasiumBenchmark:
    """The full game: NetHackScore with the whole keyboard, scored by the in-game score."""
    profiles = PROFILES["nethack"]
    chosen = pick_profile("nethack", profiles, profile or DEFAULT_PROFILES["nethack"])
    return GymnasiumBenchmark(
        "nle:NetHackScore-v0",
        benchmark_id="nethack",
        description=DESCRIPTIONS["nethack"] + f" Profile {chosen.name}: {chosen.description}.",
        make_kwargs={
            "character": chosen.parameters["character"],
            "observation_keys": list(OBSERVATION_KEYS),
            "fix_moon_phase": True,
            "penalty_step": 0.0,
        },
        max_episode_steps=NETHACK_STEPS,
        failure_return=0.0,
        metadata=_metadata(
            "NetHackScore-v0",
            action_names(tuple(nethack.ACTIONS)),
            [int(a) for a in nethack.ACTIONS],
            "the change of the in-game score",
        ),
        parameters={"actions": "full"},
        baseline=BOT,
        catalog=_catalog("nethack", chosen),
        tracker=NetHackTracker,
        wrap=nethack_full_game,
        frame=frame_later,
        video=VIDEOS,
    )


def _minihack(benchmark_id: str, profile: str | None) -> GymnasiumBenchmark:
    profiles = PROFILES[benchmark_id]
    chosen = pick_profile(benchmark_id, profiles, profile or DEFAULT_PROFILES[benchmark_id])
    env_id = chosen.parameters["env_id"]
    steps, names, keys = _limits(env_id)
    return GymnasiumBenchmark(
        f"minihack:{env_id}",
        benchmark_id=benchmark_id,
        description=(
            DESCRIPTIONS[benchmark_id]
            + f" Profile {chosen.name}: {chosen.description}. Success pays 1; each step on "
            f"which the game clock stands still (walking into a wall, a menu) costs "
            f"{MINIHACK_PENALTY}; {steps} steps at most."
        ),
        make_kwargs={"observation_keys": list(OBSERVATION_KEYS), "fix_moon_phase": True},
        max_episode_steps=steps,
        failure_return=-MINIHACK_PENALTY * steps,
        metadata=_metadata(
            env_id, names, keys, f"1 on success, -{MINIHACK_PENALTY} per step the clock stands"
        ),
        baseline=BOT,
        catalog=_catalog(benchmark_id, chosen),
        tracker=MiniHackTracker,
        wrap=wrap_minihack,
        frame=frame_later,
        video=VIDEOS,
    )


def room(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_room", profile)


def corridor(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_corridor", profile)


def mazewalk(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_mazewalk", profile)


def river(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_river", profile)


def keyroom(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_keyroom", profile)


def lavacross(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_lavacross", profile)


def wod(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_wod", profile)


def eat(profile: str | None = None) -> GymnasiumBenchmark:
    return _minihack("minihack_eat", profile)
