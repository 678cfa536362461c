"""The catalog: which family a Benchmark belongs to, the suites it is in, its difficulty
profiles and its measured reference scores, plus the static table of the suites' ids.

A Benchmark declares its entry as a ``catalog`` attribute (a ``CatalogEntry``); the
kernel reads it with ``catalog_entry(benchmark)`` and never needs it. The suites and the
families that provide them are known here statically, so ``evopolicy benchmarks list
--suite core16`` names every id and says how to install its family even when that family's
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
    "RANDOM_POLICY_DIR",
    "SUITES",
    "CatalogEntry",
    "Family",
    "FirstStepOnly",
    "Profile",
    "ReferenceScores",
    "SuiteMember",
    "catalog_entry",
    "family_installed",
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
    raise BenchmarkError(f"{benchmark_id}: unknown profile {name!r} (profiles, easiest first: {known})")


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
        Family(name="box2d", distribution="evopolicygym-box2d", extra="box2d", description="Box2D physics tasks"),
        Family(name="mujoco", distribution="evopolicygym-mujoco", extra="mujoco", description="MuJoCo locomotion and manipulation"),
        Family(name="minigrid", distribution="evopolicygym-minigrid", extra="minigrid", description="MiniGrid gridworlds"),
        Family(name="driving", distribution="evopolicygym-driving", extra="driving", description="highway-env driving"),
        Family(
            name="robotics", distribution="evopolicygym-robotics", extra="robotics", description="gymnasium-robotics Fetch arm"
        ),
        Family(name="cards", distribution="evopolicygym-cards", extra="cards", description="imperfect-information card games"),
    )
}


class SuiteMember(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    environment: str
    family: str


# The paper's Core16: eight capability families, two tasks each (the control pair and the
# box2d pair share the classic/box2d distributions here).
CORE16: tuple[SuiteMember, ...] = tuple(
    SuiteMember(id=i, environment=e, family=f)
    for i, e, f in (
        ("acrobot", "Acrobot-v1", "classic"),
        ("continuouscar", "MountainCarContinuous-v0", "classic"),
        ("bipedal", "BipedalWalker-v3", "box2d"),
        ("racing", "CarRacing-v3", "box2d"),
        ("reacher5", "Reacher-v5", "mujoco"),
        ("halfcheetah5", "HalfCheetah-v5", "mujoco"),
        ("ant5", "Ant-v5", "mujoco"),
        ("pusher5", "Pusher-v5", "mujoco"),
        ("minigrid_doorkey", "MiniGrid-DoorKey-16x16-v0", "minigrid"),
        ("minigrid_keycorridor", "MiniGrid-KeyCorridorS4R3-v0", "minigrid"),
        ("minigrid_fourrooms", "MiniGrid-FourRooms-v0", "minigrid"),
        ("minigrid_obstructedmaze", "MiniGrid-ObstructedMaze-1Q-v1", "minigrid"),
        ("parking", "parking-v0", "driving"),
        ("roundabout", "roundabout-v0", "driving"),
        ("fetch_push", "FetchPush-v4", "robotics"),
        ("fetch_pickandplace", "FetchPickAndPlace-v4", "robotics"),
    )
)

SUITES: dict[str, tuple[SuiteMember, ...]] = {"core16": CORE16}


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


def install_hint(family: str) -> str:
    """How to get a family's Benchmarks: a command that works when pasted, or why there is
    none yet."""
    known = FAMILIES.get(family)
    if known is None:
        return f"no family {family!r} is known to this project"
    if family_installed(family):
        return f"not provided by the installed {known.distribution} yet"
    extras = _extras_installing(known.distribution)
    if extras:
        return f"uv sync --extra {extras[0]}"
    return f"the {family} family is not packaged yet ({known.distribution})"


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
