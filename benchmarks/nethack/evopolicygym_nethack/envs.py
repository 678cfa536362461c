"""Gymnasium wrappers that make NLE and MiniHack Episodes reproducible and their
observations PolicyValues.

NLE ignores ``reset(seed=...)``: its games draw from NetHack's own two generators (core and
display), which it seeds from the system's entropy unless told otherwise, and NetHack's
moon phase, Friday 13th and night effects read the wall clock. ``Seeded`` derives both
generator seeds from the Episode seed before every reset, with NetHack's reseeding off;
the environments are made with ``fix_moon_phase=True`` so the clock-dependent luck comes
from those seeds as well.
"""

from __future__ import annotations

import hashlib
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from nle import nethack

__all__ = [
    "BLSTATS",
    "OBSERVATION_KEYS",
    "Seeded",
    "action_names",
    "game_seeds",
    "inventory",
    "nethack_full_game",
    "text",
    "wrap_minihack",
]

# What NLE and MiniHack are asked for: what the policy sees, plus the terminal's colors for
# video frames.
OBSERVATION_KEYS = (
    "glyphs",
    "chars",
    "colors",
    "blstats",
    "message",
    "inv_letters",
    "inv_strs",
    "inv_oclasses",
    "tty_chars",
    "tty_colors",
)
# NLE's bottom-line statistics, in blstats order.
BLSTATS = (
    "x",
    "y",
    "strength_percentage",
    "strength",
    "dexterity",
    "constitution",
    "intelligence",
    "wisdom",
    "charisma",
    "score",
    "hitpoints",
    "max_hitpoints",
    "depth",
    "gold",
    "energy",
    "max_energy",
    "armor_class",
    "monster_level",
    "experience_level",
    "experience_points",
    "time",
    "hunger_state",
    "carrying_capacity",
    "dungeon_number",
    "level_number",
    "condition",
    "alignment",
)
_MASK63 = (1 << 63) - 1


def game_seeds(seed: int) -> tuple[int, int]:
    """NetHack's (core, display) generator seeds for an Episode seed."""
    digest = hashlib.sha256(b"evopolicygym-nethack\0" + str(int(seed)).encode()).digest()
    return (
        int.from_bytes(digest[:8], "big") & _MASK63,
        int.from_bytes(digest[8:16], "big") & _MASK63,
    )


def text(row: np.ndarray[Any, Any]) -> str:
    """A NUL-padded byte row as a string."""
    return bytes(row).split(b"\0", 1)[0].decode("latin-1")


def inventory(observation: dict[str, Any]) -> list[dict[str, Any]]:
    """NLE's inventory arrays as [{letter, text, class}], class NetHack's object class."""
    items = []
    for letter, line, oclass in zip(
        observation["inv_letters"],
        observation["inv_strs"],
        observation["inv_oclasses"],
        strict=True,
    ):
        if letter == 0:
            break
        items.append({"letter": chr(int(letter)), "text": text(line), "class": int(oclass)})
    return items


def action_names(actions: tuple[Any, ...]) -> list[str]:
    """'<key>: <name>' for each action index (the key NetHack receives, as a character)."""
    names = []
    for action in actions:
        code = int(action)
        key = chr(code) if 32 <= code < 127 else f"\\x{code:02x}"
        names.append(f"{key}: {type(action).__name__}.{action.name}")
    return names


def _observation_space() -> spaces.Dict:
    byte = {"low": 0, "high": 255, "dtype": np.uint8}
    return spaces.Dict(
        {
            "glyphs": spaces.Box(0, nethack.MAX_GLYPH, (21, 79), np.int16),
            "chars": spaces.Box(shape=(21, 79), **byte),  # type: ignore[arg-type]
            "colors": spaces.Box(shape=(21, 79), **byte),  # type: ignore[arg-type]
            "blstats": spaces.Box(
                np.iinfo(np.int64).min, np.iinfo(np.int64).max, (len(BLSTATS),), np.int64
            ),
            "message": spaces.Text(256),
            "inventory": spaces.Sequence(
                spaces.Dict(
                    {
                        "letter": spaces.Text(1),
                        "text": spaces.Text(80),
                        "class": spaces.Discrete(18),
                    }
                )
            ),
            "tty_chars": spaces.Box(shape=(24, 80), **byte),  # type: ignore[arg-type]
        }
    )


class Seeded(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Seeds NetHack's generators from ``reset(seed=...)`` and shows the policy a compact
    dict: the map (glyphs, chars, colors), blstats, the message as text, the inventory as
    a list and the terminal's characters."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.observation_space = _observation_space()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            core, display = game_seeds(seed)
            self.env.unwrapped.seed(core, display, reseed=False)  # type: ignore[attr-defined]
        observation, info = self.env.reset(seed=seed, options=options)
        return self.shown(observation), info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self.shown(observation), reward, terminated, truncated, info

    @staticmethod
    def shown(raw: dict[str, Any]) -> dict[str, Any]:
        return {
            "glyphs": raw["glyphs"].copy(),
            "chars": raw["chars"].copy(),
            "colors": raw["colors"].copy(),
            "blstats": raw["blstats"].astype(np.int64),
            "message": text(raw["message"]),
            "inventory": inventory(raw),
            "tty_chars": raw["tty_chars"].copy(),
        }


def wrap_minihack(env: gymnasium.Env[Any, Any]) -> gymnasium.Env[Any, Any]:
    """A MiniHack task as the Benchmark shows it (its own action set and step limit)."""
    return Seeded(env)


def nethack_full_game(env: gymnasium.Env[Any, Any]) -> gymnasium.Env[Any, Any]:
    """NetHackScore with NLE's full keyboard (pray, pick up, apply, wear, the inventory
    letters...) rather than its 23 movement keys, and its own step limit lifted: the
    Benchmark's TimeLimit ends the Episode."""
    base = env.unwrapped
    base.actions = tuple(nethack.ACTIONS)  # type: ignore[attr-defined]
    base.action_space = spaces.Discrete(len(nethack.ACTIONS))
    # NLE's own limit (5000 by default) would quit the game first otherwise.
    base._max_episode_steps = 10**9  # type: ignore[attr-defined]
    wrapped = Seeded(env)
    wrapped.action_space = base.action_space
    return wrapped
