"""Episode videos: frames kept at a doubling stride while an Episode runs, encoded once at its
end into a small, bounded video.

A family with a renderer gives ``GymnasiumBenchmark`` a ``frame`` function (or its
environment renders ``rgb_array`` frames); with ``VideoOptions`` set, each Episode's
Environment keeps at most ``max_frames`` frames spread evenly over the Episode, however long
it runs (the stride doubles whenever the buffer fills, so only the frames kept are rendered),
and encodes them when the Episode ends: MP4 (H.264) through ``imageio-ffmpeg`` when it is
installed (the ``video`` extra; it ships its own ffmpeg), otherwise animated WebP through
Pillow. A video over ``max_bytes`` is re-encoded with every other frame, then at half size,
until it fits. The Benchmark's ``score()`` publishes the Episodes ``episodes`` names (the
best and the worst by default, or all) as bulk Feedback artifacts.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec
import numpy as np

from evopolicygym.benchmark.contract import BenchmarkError

__all__ = [
    "VIDEO_KEY",
    "FrameSampler",
    "VideoOptions",
    "encode_video",
    "mp4_available",
    "video_suffix",
]

# The summary key carrying an Episode's encoded video from the Host to score(), which turns
# the chosen ones into artifacts and drops the key from every record.
VIDEO_KEY = "video"
MEDIA_TYPES = {"mp4": "video/mp4", "webp": "image/webp"}


class VideoOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Which Episodes of an Evaluation get a video, and its bounds.

    ``episodes``: ``best_worst`` (the highest- and lowest-scoring Episode; one video when
    they are the same Episode) or ``all``. ``max_frames`` frames at most (subsampled evenly
    over the Episode, first and last kept), ``fps`` frames per second of playback,
    ``max_bytes`` per video, ``format``: ``auto`` (MP4 when imageio-ffmpeg is installed,
    else WebP), ``mp4`` or ``webp``."""

    episodes: Literal["best_worst", "all"] = "best_worst"
    max_frames: int = 96
    fps: int = 12
    max_bytes: int = 2_000_000
    format: Literal["auto", "mp4", "webp"] = "auto"

    def __post_init__(self) -> None:
        if self.max_frames < 2 or self.fps < 1 or self.max_bytes < 4096:
            raise BenchmarkError(
                "video: max_frames must be at least 2, fps at least 1, max_bytes at least 4096"
            )


class FrameSampler:
    """At most ``limit`` frames of an Episode of unknown length, evenly spread: step ``t`` is
    kept when ``t`` is a multiple of the stride, and the stride doubles (dropping every other
    kept frame) whenever ``limit`` is reached. ``finish`` adds the last frame.

    ``render`` returns a frame (H x W x 3 uint8), or a zero-argument callable drawing it
    later: a family whose drawing costs more than a copy of its state snapshots the state at
    each kept step and draws only the frames still kept at the end."""

    def __init__(self, limit: int, render: Callable[[], Any]) -> None:
        self.limit = limit
        self.stride = 1
        self._render = render
        self.frames: list[tuple[int, Any]] = []
        self._last = -1

    def _grab(self, t: int) -> None:
        frame = self._render()
        if frame is not None:
            self.frames.append((t, frame))
            self._last = t

    def offer(self, t: int) -> None:
        """Step ``t`` (0 after reset) has happened: render it if it is kept."""
        if t % self.stride:
            return
        self._grab(t)
        if len(self.frames) >= self.limit:
            self.stride *= 2
            self.frames = [(s, f) for s, f in self.frames if s % self.stride == 0]
            self._last = self.frames[-1][0]

    def finish(self, t: int) -> list[np.ndarray[Any, Any]]:
        """The kept frames, the last step's included."""
        if self._last != t:
            self._grab(t)
        drawn = (_rgb(f() if callable(f) else f) for _, f in self.frames)
        return [f for f in drawn if f is not None]


def _rgb(image: Any) -> np.ndarray[Any, Any] | None:
    if image is None:
        return None
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or min(array.shape[:2]) < 2:
        raise BenchmarkError(f"video: a frame must be H x W x 3 (or 4), got {array.shape}")
    return np.ascontiguousarray(array[:, :, :3], dtype=np.uint8)


def mp4_available() -> bool:
    """Whether MP4 can be written here (imageio-ffmpeg and its bundled ffmpeg)."""
    try:
        import imageio_ffmpeg

        return os.path.exists(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError):
        return False


def video_suffix(media_type: str) -> str:
    """``mp4`` or ``webp`` for a media type ``encode_video`` returns."""
    return next(k for k, v in MEDIA_TYPES.items() if v == media_type)


def _even(frames: Sequence[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """All frames at the first frame's size, cropped to even sides (H.264 with yuv420p)."""
    height, width = frames[0].shape[:2]
    height, width = max(2, height - height % 2), max(2, width - width % 2)
    out = []
    for frame in frames:
        if frame.shape[:2] != frames[0].shape[:2]:
            frame = _resized(frame, frames[0].shape[1], frames[0].shape[0])
        out.append(np.ascontiguousarray(frame[:height, :width]))
    return out


def _resized(frame: np.ndarray[Any, Any], width: int, height: int) -> np.ndarray[Any, Any]:
    from PIL import Image

    return np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.BILINEAR))


def _mp4(frames: Sequence[np.ndarray[Any, Any]], fps: int) -> bytes:
    import imageio_ffmpeg

    height, width = frames[0].shape[:2]
    with tempfile.TemporaryDirectory(prefix="evopolicy-video-") as folder:
        path = os.path.join(folder, "episode.mp4")
        writer = imageio_ffmpeg.write_frames(
            path,
            (width, height),
            fps=fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            # Byte-identical output for identical frames: one thread, no encoder timestamps.
            output_params=["-threads", "1", "-fflags", "+bitexact", "-flags", "+bitexact"],
            ffmpeg_log_level="error",
        )
        writer.send(None)
        for frame in frames:
            writer.send(frame)
        writer.close()
        with open(path, "rb") as handle:
            return handle.read()


def _webp(frames: Sequence[np.ndarray[Any, Any]], fps: int) -> bytes:
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    out = io.BytesIO()
    images[0].save(
        out,
        format="WEBP",
        save_all=True,
        append_images=images[1:],
        duration=max(1, round(1000 / fps)),
        loop=0,
        quality=60,
        method=4,
    )
    return out.getvalue()


def encode_video(frames: Sequence[Any], options: VideoOptions | None = None) -> tuple[bytes, str]:
    """``(data, media_type)``: ``frames`` (each H x W x 3 uint8) as one video of at most
    ``options.max_bytes`` (fewer frames, then smaller ones, until it fits)."""
    options = options or VideoOptions()
    kept = [f for f in (_rgb(f) for f in frames) if f is not None]
    if not kept:
        raise BenchmarkError("video: no frames to encode")
    kind = options.format
    if kind == "auto":
        kind = "mp4" if mp4_available() else "webp"
    elif kind == "mp4" and not mp4_available():
        raise BenchmarkError("video: MP4 needs imageio-ffmpeg: uv sync --extra video")
    encode = _mp4 if kind == "mp4" else _webp
    current = _even(kept)
    for _ in range(12):
        data = encode(current, options.fps)
        if len(data) <= options.max_bytes:
            return data, MEDIA_TYPES[kind]
        if len(current) > 8:
            current = current[::2]
        else:
            height, width = current[0].shape[:2]
            if min(height, width) < 16:
                break
            current = _even([_resized(f, width // 2, height // 2) for f in current])
    raise BenchmarkError(f"video: cannot fit the Episode in {options.max_bytes} bytes")
