"""The catalog: which family a Benchmark belongs to, the suites it is in, its difficulty
profiles and its measured reference scores, plus the static tables of every family's ids
(``TASKS``) and the suites' (``CORE16``).

A Benchmark declares its entry as a ``catalog`` attribute (a ``CatalogEntry``); the
kernel reads it with ``catalog_entry(benchmark)`` and never needs it. The tasks, the suites
and the families that provide them are known here statically, so ``evopolicy benchmarks
list`` names every id and says how to install its family even when that family's
distribution is not installed.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution, metadata
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.benchmark.contract import Benchmark, BenchmarkError

__all__ = [
    "CORE16",
    "FAMILIES",
    "FRONTIER",
    "RANDOM_POLICY_DIR",
    "SUITES",
    "TASKS",
    "CatalogEntry",
    "CatalogTask",
    "Family",
    "FirstStepOnly",
    "Profile",
    "ReferenceScores",
    "SuiteMember",
    "catalog_entry",
    "family_installed",
    "family_of_distribution",
    "install_command",
    "install_hint",
    "pick_profile",
]


# A uniform-random program for any action space: the floor ReferenceScores.random measures.
RANDOM_POLICY_DIR = Path(__file__).resolve().parent / "baselines" / "random"


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """A named set of parameters of one Benchmark; ``difficulty`` orders a family's profiles
    (0 is the easiest). ``parameters`` are the Benchmark's own (for a Gymnasium task: the
    environment id and ``gymnasium.make`` keywords), recorded in its parameters digest."""

    name: str
    difficulty: int
    parameters: dict[str, Any] = {}
    description: str = ""


class ReferenceScores(msgspec.Struct, frozen=True, kw_only=True):
    """Scores measured with ``evaluate()`` (the assessment split, its seed and Episode count
    as given): the packaged baseline program's and a uniform-random policy's."""

    baseline: float
    random: float
    split: str = "assessment"
    seed: int = 0
    episodes: int = 0


class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """What the catalog knows of one Benchmark.

    ``family`` names its family (a key of ``FAMILIES`` for the project's own); ``suites`` the
    suites it belongs to (``core16``); ``aliases`` other registered names of the same
    Benchmark; ``profiles`` its difficulty profiles, easiest first, and ``profile`` the one
    this instance was built with; ``reference`` the measured baseline and random scores;
    ``deterministic`` False where replaying an Episode cannot be exact (its Feedback says so).
    """

    family: str
    suites: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    profiles: tuple[Profile, ...] = ()
    profile: str | None = None
    reference: ReferenceScores | None = None
    deterministic: bool = True
    install: str | None = None  # how to install it, where the family table does not say

    def __post_init__(self) -> None:
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise BenchmarkError(f"catalog: duplicate profile names in {names}")
        if [p.difficulty for p in self.profiles] != sorted(p.difficulty for p in self.profiles):
            raise BenchmarkError("catalog: profiles must be listed easiest first (by difficulty)")
        if self.profile is not None and self.profile not in names:
            raise BenchmarkError(f"catalog: profile {self.profile!r} is not one of {names}")

    @property
    def difficulty(self) -> int | None:
        return next((p.difficulty for p in self.profiles if p.name == self.profile), None)


def pick_profile(benchmark_id: str, profiles: tuple[Profile, ...], name: str) -> Profile:
    """The profile ``name`` of ``profiles``, or a one-line error naming the ones there are."""
    for profile in profiles:
        if profile.name == name:
            return profile
    known = ", ".join(p.name for p in profiles)
    raise BenchmarkError(
        f"{benchmark_id}: unknown profile {name!r} (profiles, easiest first: {known})"
    )


def catalog_entry(benchmark: Any) -> CatalogEntry | None:
    """The Benchmark's declared catalog entry, None when it declares none."""
    entry = getattr(benchmark, "catalog", None)
    return entry if isinstance(entry, CatalogEntry) else None


class Family(msgspec.Struct, frozen=True, kw_only=True):
    """A family of Benchmarks: the distribution that provides it and the root project's extra
    that installs it (None: installed with evopolicygym itself)."""

    name: str
    distribution: str
    extra: str | None
    description: str


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            name="classic",
            distribution="evopolicygym-classic",
            extra=None,
            description="Gymnasium classic control and toy-text tasks",
        ),
        Family(
            name="box2d",
            distribution="evopolicygym-box2d",
            extra="box2d",
            description="Box2D physics tasks",
        ),
        Family(
            name="mujoco",
            distribution="evopolicygym-mujoco",
            extra="mujoco",
            description="MuJoCo locomotion and manipulation",
        ),
        Family(
            name="minigrid",
            distribution="evopolicygym-minigrid",
            extra="minigrid",
            description="MiniGrid gridworlds",
        ),
        Family(
            name="driving",
            distribution="evopolicygym-driving",
            extra="driving",
            description="highway-env driving",
        ),
        Family(
            name="robotics",
            distribution="evopolicygym-robotics",
            extra="robotics",
            description="gymnasium-robotics Fetch arm",
        ),
        Family(
            name="cards",
            distribution="evopolicygym-cards",
            extra="cards",
            description="imperfect-information card games",
        ),
        Family(
            name="nethack",
            distribution="evopolicygym-nethack",
            extra="nethack",
            description="NetHack through NLE, and MiniHack's navigation and skill tasks",
        ),
        Family(
            name="crafter",
            distribution="evopolicygym-crafter",
            extra="crafter",
            description="Crafter's open-world survival game",
        ),
        Family(
            name="textworld",
            distribution="evopolicygym-textworld",
            extra="textworld",
            description="TextWorld text adventures generated from seeds",
        ),
    )
}


class CatalogTask(msgspec.Struct, frozen=True, kw_only=True):
    """A Benchmark id one of the project's families registers, known here whether or not the
    family is installed: its family, the environment behind it and what it asks of a policy.
    ``alias_of`` names the Benchmark an alias builds (Core16's ``continuouscar``)."""

    id: str
    family: str
    environment: str
    description: str
    alias_of: str | None = None


# Every id the families register (a test holds this to their entry points), so `benchmarks
# list` names them all and `--benchmark ID` says which extra installs a missing one.
TASKS: dict[str, CatalogTask] = {
    t.id: t
    for t in (
        CatalogTask(
            id="cartpole",
            family="classic",
            environment="CartPole-v1",
            description=(
                "Balance a pole on a cart by pushing it left or right, for up to 500 steps."
            ),
        ),
        CatalogTask(
            id="frozen-lake",
            family="classic",
            environment="FrozenLake-v1",
            description=(
                "Walk across a slippery frozen lake to the goal without falling into a hole."
            ),
        ),
        CatalogTask(
            id="acrobot",
            family="classic",
            environment="Acrobot-v1",
            description=(
                "Swing the two-link Acrobot's tip above the target height as fast as possible."
            ),
        ),
        CatalogTask(
            id="mountain-car-continuous",
            family="classic",
            environment="MountainCarContinuous-v0",
            description=(
                "Drive an underpowered car up the right hill to the flag, spending little force."
            ),
        ),
        CatalogTask(
            id="continuouscar",
            family="classic",
            environment="MountainCarContinuous-v0",
            description=(
                "Drive an underpowered car up the right hill to the flag, spending little force."
            ),
            alias_of="mountain-car-continuous",
        ),
        CatalogTask(
            id="lunar-lander",
            family="box2d",
            environment="LunarLander-v3",
            description=(
                "Land the lunar module softly on the pad with four discrete engine actions."
            ),
        ),
        CatalogTask(
            id="bipedal",
            family="box2d",
            environment="BipedalWalker-v3",
            description="Walk a two-legged robot to the end of the course with four joint torques.",
        ),
        CatalogTask(
            id="racing",
            family="box2d",
            environment="CarRacing-v3",
            description="Drive a car round a random track from 96x96 RGB frames seen from above.",
        ),
        CatalogTask(
            id="reacher5",
            family="mujoco",
            environment="Reacher-v5",
            description="Move a two-joint arm's fingertip onto a random target in the plane.",
        ),
        CatalogTask(
            id="halfcheetah5",
            family="mujoco",
            environment="HalfCheetah-v5",
            description="Make a planar two-legged cheetah run forward as fast as it can.",
        ),
        CatalogTask(
            id="ant5",
            family="mujoco",
            environment="Ant-v5",
            description="Make a four-legged ant walk forward without falling over.",
        ),
        CatalogTask(
            id="pusher5",
            family="mujoco",
            environment="Pusher-v5",
            description="Push a cylinder on a table to a goal with a seven-joint arm.",
        ),
        CatalogTask(
            id="minigrid_doorkey",
            family="minigrid",
            environment="MiniGrid-DoorKey-16x16-v0",
            description="Pick up the key, unlock the door and reach the goal square.",
        ),
        CatalogTask(
            id="minigrid_keycorridor",
            family="minigrid",
            environment="MiniGrid-KeyCorridorS4R3-v0",
            description="Find the key, unlock the room off the corridor and pick up its ball.",
        ),
        CatalogTask(
            id="minigrid_fourrooms",
            family="minigrid",
            environment="MiniGrid-FourRooms-v0",
            description="Reach the goal square in four rooms joined by gaps, from a random start.",
        ),
        CatalogTask(
            id="minigrid_obstructedmaze",
            family="minigrid",
            environment="MiniGrid-ObstructedMaze-1Q-v1",
            description="Pick up the ball behind locked, blocked doors whose keys hide in boxes.",
        ),
        CatalogTask(
            id="parking",
            family="driving",
            environment="parking-v0",
            description="Park the car in the goal spot of a parking lot, steering continuously.",
        ),
        CatalogTask(
            id="roundabout",
            family="driving",
            environment="roundabout-v0",
            description="Drive through a busy roundabout without colliding, as fast as is safe.",
        ),
        CatalogTask(
            id="fetch_push",
            family="robotics",
            environment="FetchPush-v4",
            description="Push the block on the table to the goal with the Fetch arm.",
        ),
        CatalogTask(
            id="fetch_pickandplace",
            family="robotics",
            environment="FetchPickAndPlace-v4",
            description="Pick the block up with the Fetch arm and place it at the goal.",
        ),
        CatalogTask(
            id="leduc",
            family="cards",
            environment="OpenSpiel leduc_poker",
            description="Leduc poker, heads-up, against a fixed opponent: win chips over a match.",
        ),
        CatalogTask(
            id="holdem_limit",
            family="cards",
            environment="OpenSpiel universal_poker (limit Hold'em)",
            description=(
                "Heads-up limit Texas Hold'em against a fixed opponent: win chips over a match."
            ),
        ),
        CatalogTask(
            id="nethack",
            family="nethack",
            environment="NetHackScore-v0",
            description=(
                "Play the full game of NetHack: descend, fight, eat and survive; scored by the "
                "in-game score."
            ),
        ),
        CatalogTask(
            id="minihack_room",
            family="nethack",
            environment="MiniHack-Room-Monster-15x15-v0",
            description=("Reach the stairs down of a 15x15 room while monsters attack."),
        ),
        CatalogTask(
            id="minihack_corridor",
            family="nethack",
            environment="MiniHack-Corridor-R3-v0",
            description=("Find the stairs down through corridors joining three rooms."),
        ),
        CatalogTask(
            id="minihack_mazewalk",
            family="nethack",
            environment="MiniHack-MazeWalk-15x15-v0",
            description=("Find the stairs down of a 15x15 maze seen only where the hero has been."),
        ),
        CatalogTask(
            id="minihack_river",
            family="nethack",
            environment="MiniHack-River-v0",
            description=(
                "Push boulders into a river to build a crossing and reach the stairs beyond it."
            ),
        ),
        CatalogTask(
            id="minihack_keyroom",
            family="nethack",
            environment="MiniHack-KeyRoom-S5-v0",
            description=(
                "Pick up the key, unlock the room's door with it and reach the stairs inside."
            ),
        ),
        CatalogTask(
            id="minihack_lavacross",
            family="nethack",
            environment="MiniHack-LavaCross-Full-v0",
            description=(
                "Cross a river of lava with the item found nearby (levitation or freezing) to "
                "the stairs."
            ),
        ),
        CatalogTask(
            id="minihack_wod",
            family="nethack",
            environment="MiniHack-WoD-Easy-Full-v0",
            description=(
                "Kill a monster blocking the way with a wand of death zapped in its direction."
            ),
        ),
        CatalogTask(
            id="minihack_eat",
            family="nethack",
            environment="MiniHack-Eat-v0",
            description=("Find the edible item in the room and eat it."),
        ),
        CatalogTask(
            id="crafter",
            family="crafter",
            environment="Crafter",
            description=(
                "Survive in Crafter's open world and unlock its 22 achievements: collect, "
                "craft, place, eat, defeat."
            ),
        ),
        CatalogTask(
            id="textworld_coin",
            family="textworld",
            environment="TextWorld coin collector",
            description=(
                "Find the coin in a generated house of rooms by typing commands; the longer "
                "the quest, the harder."
            ),
        ),
        CatalogTask(
            id="textworld_treasure",
            family="textworld",
            environment="TextWorld treasure hunter",
            description=(
                "Find and take a named object in a generated world of rooms, doors and distractors."
            ),
        ),
        CatalogTask(
            id="textworld_cooking",
            family="textworld",
            environment="TextWorld cooking game",
            description=(
                "Gather and prepare a recipe's ingredients in a generated house and eat the meal."
            ),
        ),
    )
}


class SuiteMember(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    environment: str
    family: str


def _members(*ids: str) -> tuple[SuiteMember, ...]:
    return tuple(
        SuiteMember(id=i, environment=TASKS[i].environment, family=TASKS[i].family) for i in ids
    )


# The paper's Core16: eight capability families, two tasks each (the control pair and the
# box2d pair share the classic/box2d distributions here).
CORE16: tuple[SuiteMember, ...] = _members(
    "acrobot",
    "continuouscar",
    "bipedal",
    "racing",
    "reacher5",
    "halfcheetah5",
    "ant5",
    "pusher5",
    "minigrid_doorkey",
    "minigrid_keycorridor",
    "minigrid_fourrooms",
    "minigrid_obstructedmaze",
    "parking",
    "roundabout",
    "fetch_push",
    "fetch_pickandplace",
)

# Long-horizon worlds: thousands of steps, partial observability, text; where a short rule is
# far from the ceiling (issue 29's families, each at the difficulty of its default profile).
FRONTIER: tuple[SuiteMember, ...] = _members(
    "nethack",
    "minihack_room",
    "minihack_corridor",
    "minihack_mazewalk",
    "minihack_river",
    "minihack_keyroom",
    "minihack_lavacross",
    "minihack_wod",
    "minihack_eat",
    "crafter",
    "textworld_coin",
    "textworld_treasure",
    "textworld_cooking",
)

SUITES: dict[str, tuple[SuiteMember, ...]] = {"core16": CORE16, "frontier": FRONTIER}


def family_installed(family: str) -> bool:
    """Whether the family's distribution is installed here."""
    known = FAMILIES.get(family)
    if known is None:
        return False
    try:
        distribution(known.distribution)
    except PackageNotFoundError:
        return False
    return True


def _extras_installing(dist: str) -> list[str]:
    """The root project's extras that install ``dist``, read from its own metadata (so the
    hint is true of the installed project, not of a table that may have drifted)."""
    try:
        requires = metadata("evopolicygym").get_all("Requires-Dist") or []
    except PackageNotFoundError:
        return []
    found = []
    for line in requires:
        name = re.match(r"[A-Za-z0-9_.-]+", line)
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", line)
        if name and extra and name.group(0).replace("_", "-").lower() == dist:
            found.append(extra.group(1))
    return found


def install_command(family: str) -> str | None:
    """The command installing a family (``uv sync --extra <extra>``), installed or not; None
    where the installed project offers no extra for it."""
    known = FAMILIES.get(family)
    if known is None:
        return None
    extras = _extras_installing(known.distribution)
    return f"uv sync --extra {extras[0]}" if extras else None


def install_hint(family: str) -> str:
    """How to get a family's Benchmarks: a command that works when pasted, or why there is
    none yet."""
    known = FAMILIES.get(family)
    if known is None:
        return f"no family {family!r} is known to this project"
    if family_installed(family):
        return f"not provided by the installed {known.distribution} yet"
    return (
        install_command(family) or f"the {family} family is not packaged yet ({known.distribution})"
    )


def family_of_distribution(name: str) -> str | None:
    """The family a distribution provides (``evopolicygym-box2d`` -> ``box2d``), if any."""
    normalized = re.sub(r"[-_.]+", "-", name).lower()
    return next((f.name for f in FAMILIES.values() if f.distribution == normalized), None)


class FirstStepOnly:
    """A Benchmark whose Episodes end after their first step: evaluated, it measures what an
    Episode costs beyond its steps (a policy process, the Environment made and reset, scoring).
    Everything but the spec's step limit is the wrapped Benchmark's."""

    def __init__(self, inner: Benchmark) -> None:
        self._inner = inner
        self.spec = msgspec.structs.replace(inner.spec, max_episode_steps=1)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)
