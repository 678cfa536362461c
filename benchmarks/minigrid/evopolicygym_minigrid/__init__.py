"""The MiniGrid family: Core16's four gridworld tasks (``minigrid_doorkey``,
``minigrid_keycorridor``, ``minigrid_fourrooms``, ``minigrid_obstructedmaze``) with
difficulty profiles (``--param profile=...``), domain Feedback (goal reached, steps to the
key and the door, why an Episode ended) and a planning baseline program.

Installed with ``uv sync --extra minigrid`` from the project root (it brings ``minigrid``).
"""

from evopolicygym_minigrid.tasks import (
    BASELINES_DIR,
    PROFILES,
    MiniGridTracker,
    doorkey,
    fourrooms,
    keycorridor,
    obstructedmaze,
)

__all__ = [
    "BASELINES_DIR",
    "PROFILES",
    "MiniGridTracker",
    "doorkey",
    "fourrooms",
    "keycorridor",
    "obstructedmaze",
]
