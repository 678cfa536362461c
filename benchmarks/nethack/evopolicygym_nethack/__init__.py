"""The NetHack family: the full game through NLE (``nethack``) and MiniHack's navigation and
skill tasks (``minihack_room``, ``minihack_corridor``, ``minihack_mazewalk``,
``minihack_river``, ``minihack_keyroom``, ``minihack_lavacross``, ``minihack_wod``,
``minihack_eat``), with difficulty profiles (``--param profile=...``), domain Feedback
(score, depth, cause of death, the last screens; goal reached) and a rule-bot baseline.

Installed with ``uv sync --extra nethack`` from the project root (it brings ``nle`` and
``minihack``).
"""

from evopolicygym_nethack.tasks import (
    BASELINES_DIR,
    DEFAULT_PROFILES,
    PROFILES,
    REFERENCES,
    corridor,
    eat,
    keyroom,
    lavacross,
    mazewalk,
    nethack_game,
    river,
    room,
    wod,
)

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
