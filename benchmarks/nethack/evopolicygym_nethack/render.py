"""Video frames of NetHack and MiniHack Episodes: the 24 x 80 terminal drawn as text in its
colors, with Pillow's built-in bitmap font (nothing is read from disk or the network)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from PIL import Image, ImageDraw, ImageFont

__all__ = ["CELL", "draw", "frame", "frame_later"]

CELL = (6, 12)  # pixels per terminal character (width, height)
# The 16 curses colors NetHack uses (NLE's tty_colors), as RGB.
PALETTE = (
    (0, 0, 0),
    (170, 0, 0),
    (0, 170, 0),
    (170, 85, 0),
    (0, 0, 170),
    (170, 0, 170),
    (0, 170, 170),
    (170, 170, 170),
    (85, 85, 85),
    (255, 85, 85),
    (85, 255, 85),
    (255, 255, 85),
    (85, 85, 255),
    (255, 85, 255),
    (85, 255, 255),
    (255, 255, 255),
)


@functools.cache
def _atlas() -> np.ndarray[Any, Any]:
    """Every byte as a CELL-sized boolean mask (printable ASCII drawn, the rest blank)."""
    font = ImageFont.load_default()
    width, height = CELL
    atlas = np.zeros((256, height, width), bool)
    for code in range(33, 127):
        image = Image.new("L", CELL, 0)
        ImageDraw.Draw(image).text((0, 0), chr(code), fill=255, font=font)
        atlas[code] = np.asarray(image) > 96
    return atlas


@functools.cache
def _palette() -> np.ndarray[Any, Any]:
    colors = np.array(PALETTE, np.uint8)
    colors[0] = PALETTE[7]  # black text would not show on the black background
    return colors


def _terminal(env: gymnasium.Env[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    base = env.unwrapped
    keys = list(base._observation_keys)  # type: ignore[attr-defined]
    last = base.last_observation  # type: ignore[attr-defined]
    if not last:
        return np.zeros((24, 80), np.uint8), np.zeros((24, 80), np.int8)
    return last[keys.index("tty_chars")], last[keys.index("tty_colors")]


def frame(env: gymnasium.Env[Any, Any]) -> np.ndarray[Any, Any]:
    """The terminal as an RGB image, 24 * 12 by 80 * 6 pixels (uint8, H x W x 3)."""
    return draw(*_terminal(env))


def frame_later(env: gymnasium.Env[Any, Any]) -> Callable[[], np.ndarray[Any, Any]]:
    """The terminal as it is now, drawn when called: a video keeps frames at a doubling
    stride, so most snapshots are dropped before they would be drawn."""
    chars, colors = _terminal(env)
    return functools.partial(draw, chars.copy(), colors.copy())


def draw(chars: np.ndarray[Any, Any], colors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Terminal characters and their colors (24 x 80 each) as an RGB image."""
    width, height = CELL
    rows, columns = chars.shape
    # One gather for the whole screen (rows, columns, cell height, cell width) rather than a
    # loop over 1,920 cells: a frame costs well under a millisecond.
    masks = _atlas()[np.asarray(chars, np.uint8)]
    rgb = _palette()[np.asarray(colors, np.int64) & 15]
    image = masks[..., None] * rgb[:, :, None, None, :]
    return np.ascontiguousarray(
        image.transpose(0, 2, 1, 3, 4).reshape(rows * height, columns * width, 3), np.uint8
    )
