"""Video frames of Crafter Episodes: what the player sees, drawn larger."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

__all__ = ["FRAME_SIZE", "frame"]

FRAME_SIZE = 252  # a multiple of the 9 cells across, so no cell is cut


def frame(env: gymnasium.Env[Any, Any]) -> np.ndarray[Any, Any]:
    """The current state as Crafter draws it for the player (the 9 x 7 cells around it above
    the inventory), ``FRAME_SIZE`` pixels square, H x W x 3 uint8. Drawing never changes the
    Episode (see ``world.Game.render``)."""
    game = env.unwrapped.game  # type: ignore[attr-defined]
    image = game.render((FRAME_SIZE, FRAME_SIZE))
    return np.ascontiguousarray(image, dtype=np.uint8)
