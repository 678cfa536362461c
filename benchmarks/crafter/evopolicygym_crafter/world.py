"""Crafter's world as a Gymnasium environment, deterministic across processes.

Crafter 1.8 keeps the creatures of each world chunk in a ``set``, iterated in the order of
the objects' ``id()`` hashes; when a chunk holds too many cows or zombies, the one removed is
drawn by index from that iteration. Which object that is depends on where the interpreter
happened to allocate it, so the same seed and the same actions give different Episodes in
different processes. ``OrderedWorld`` keeps each chunk's objects in insertion order instead:
the rules, the random draws and their distribution are Crafter's own; only the order is fixed.

Crafter also draws the night-time noise of its image from the world's random stream, so
rendering would change what happens next. ``Game`` renders with that stream saved and
restored, and skips rendering altogether when no image is observed: the observation mode and
recorded videos never change an Episode. ``reset(seed=s)`` always makes the world Crafter
makes for seed ``s`` on its first Episode.

``CrafterEnv`` observes a semantic local view (the 9 x 7 cells Crafter's image shows) and
the player's state; see ``OBSERVATION_TEXT``. Importing this module registers it with
Gymnasium as ``ENV_ID``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

import crafter
import gymnasium
import numpy as np
from crafter import constants, engine, objects
from gymnasium import spaces

__all__ = [
    "ACHIEVEMENTS",
    "ACTIONS",
    "ENV_ID",
    "ITEMS",
    "OBSERVATIONS",
    "SEMANTIC_IDS",
    "VIEW",
    "VITALS",
    "CrafterEnv",
    "Game",
    "InsertionOrderedSet",
    "OrderedWorld",
]

ENV_ID = "evopolicygym-crafter/Crafter-v0"
ACTIONS: tuple[str, ...] = tuple(constants.actions)
ACHIEVEMENTS: tuple[str, ...] = tuple(constants.achievements)
VITALS = ("health", "food", "drink", "energy")
ITEMS: tuple[str, ...] = tuple(name for name in constants.items if name not in VITALS)
# Crafter's own semantic ids: 0 for no material (here: outside the world), its materials
# from 1, then the kinds of object in this order (its SemanticView's).
OBJECT_KINDS = (
    objects.Player,
    objects.Cow,
    objects.Zombie,
    objects.Skeleton,
    objects.Arrow,
    objects.Plant,
)
SEMANTIC_IDS: tuple[str, ...] = (
    "none",
    *constants.materials,
    *(kind.__name__.lower() for kind in OBJECT_KINDS),
)
VIEW = (9, 7)  # (width, height) in cells: the part of Crafter's 9 x 9 image showing the world
FACINGS = {(-1, 0): 0, (1, 0): 1, (0, -1): 2, (0, 1): 3}  # left, right, up, down
OBSERVATIONS = ("semantic", "image", "both")
MAX_COUNT = 9  # every inventory count and vital is clamped to 0..9


class InsertionOrderedSet:
    """The part of ``set`` Crafter's world uses (add, remove, iterate, len), iterating in
    insertion order whatever the members' hashes."""

    __slots__ = ("_members",)

    def __init__(self, members: Iterable[Any] = ()) -> None:
        self._members: dict[Any, None] = dict.fromkeys(members)

    def add(self, member: Any) -> None:
        self._members[member] = None

    def remove(self, member: Any) -> None:
        del self._members[member]

    def discard(self, member: Any) -> None:
        self._members.pop(member, None)

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._members))

    def __len__(self) -> int:
        return len(self._members)


class OrderedWorld(engine.World):
    """Crafter's world with each chunk's objects in insertion order (see the module docs)."""

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._chunks: collections.defaultdict[Any, InsertionOrderedSet] = collections.defaultdict(
            InsertionOrderedSet
        )


class Game(crafter.Env):
    """Crafter's game with an ordered world, reseedable, rendering without side effects."""

    def __init__(self, *, length: int, images: bool, size: int = 64) -> None:
        super().__init__(area=(64, 64), view=(9, 9), size=(size, size), length=length, seed=0)
        # The world was made by Crafter's constructor: every reset from now on is ordered.
        self._world.__class__ = OrderedWorld
        self._world.reset()
        self.images = images

    def reseed(self, seed: int) -> None:
        """The next reset makes the world Crafter makes for ``seed`` on its first Episode."""
        self._seed = int(seed)
        self._episode = 0

    @property
    def world(self) -> engine.World:
        return self._world

    @property
    def player(self) -> objects.Player:
        return self._player

    def semantic(self) -> np.ndarray[Any, Any]:
        """The whole world's semantic map, indexed [x, y] (Crafter's SemanticView)."""
        return self._sem_view()

    def render(self, size: Any = None) -> np.ndarray[Any, Any]:
        random_state = self._world.random.get_state()
        try:
            return super().render(size)
        finally:
            self._world.random.set_state(random_state)

    def _obs(self) -> np.ndarray[Any, Any] | None:
        return self.render() if self.images else None


def _observation_space(observation: str, size: int) -> spaces.Dict:
    count = spaces.Discrete(MAX_COUNT + 1)
    fields: dict[str, spaces.Space[Any]] = {}
    if observation != "image":
        fields["view"] = spaces.Box(0, len(SEMANTIC_IDS) - 1, (VIEW[1], VIEW[0]), np.uint8)
    fields["inventory"] = spaces.Dict({name: count for name in ITEMS})
    for name in VITALS:
        fields[name] = count
    fields["facing"] = spaces.Discrete(len(FACINGS))
    fields["sleeping"] = spaces.Discrete(2)
    fields["daylight"] = spaces.Box(0.0, 1.0, (), np.float32)
    if observation != "semantic":
        fields["image"] = spaces.Box(0, 255, (size, size, 3), np.uint8)
    return spaces.Dict(fields)


class CrafterEnv(gymnasium.Env[dict[str, Any], int]):
    """Crafter for Gymnasium: ``terminated`` when the player dies, ``truncated`` at
    ``length`` steps; the reward is Crafter's (+1 for each step that unlocks an achievement
    for the first time in the Episode, plus a tenth of each change in health)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 12}  # noqa: RUF012 (gymnasium reads the class)

    def __init__(
        self,
        length: int = 10_000,
        observation: str = "semantic",
        size: int = 64,
        render_mode: str | None = None,
    ) -> None:
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"observation is one of {', '.join(OBSERVATIONS)}, not {observation!r}"
            )
        if type(length) is not int or length <= 0:
            raise ValueError(f"length must be a positive int, got {length!r}")
        self.observation = observation
        self.render_mode = render_mode
        self.game = Game(length=length, images=observation != "semantic", size=size)
        self.observation_space = _observation_space(observation, size)
        self.action_space = spaces.Discrete(len(ACTIONS))  # type: ignore[assignment]
        self._padded = np.zeros((64 + VIEW[0], 64 + VIEW[1]), np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.game.reseed(seed)
        image = self.game.reset()
        return self._observe(self.game.semantic(), image), {}

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        image, reward, done, info = self.game.step(int(action))
        dead = self.game.player.health <= 0
        observation = self._observe(info["semantic"], image)
        return observation, float(reward), bool(dead), bool(done and not dead), {}

    def render(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        from evopolicygym_crafter.render import frame

        return frame(self)

    def local_view(self, semantic: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The 9 x 7 cells around the player as rows (north first) of columns (west first):
        the player at [3][4]; 0 outside the world."""
        half_w, half_h = VIEW[0] // 2, VIEW[1] // 2
        padded = self._padded
        padded[half_w : half_w + 64, half_h : half_h + 64] = semantic
        x, y = (int(v) for v in self.game.player.pos)
        return np.ascontiguousarray(padded[x : x + VIEW[0], y : y + VIEW[1]].T)

    def _observe(
        self, semantic: np.ndarray[Any, Any], image: np.ndarray[Any, Any] | None
    ) -> dict[str, Any]:
        player = self.game.player
        inventory = player.inventory
        observation: dict[str, Any] = {}
        if self.observation != "image":
            observation["view"] = self.local_view(semantic)
        observation["inventory"] = {name: int(inventory[name]) for name in ITEMS}
        for name in VITALS:
            observation[name] = int(inventory[name])
        observation["facing"] = FACINGS[(int(player.facing[0]), int(player.facing[1]))]
        observation["sleeping"] = int(bool(player.sleeping))
        observation["daylight"] = float(self.game.world.daylight)
        if image is not None:
            observation["image"] = image
        return observation

    def unlocked(self) -> list[str]:
        """The achievements unlocked so far this Episode, in Crafter's order."""
        done = self.game.player.achievements
        return [name for name in ACHIEVEMENTS if done.get(name, 0) > 0]


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:CrafterEnv", max_episode_steps=10_000)
