"""Episode videos of Gymnasium Benchmarks: recorded by the Environment in the Host (frames
at a doubling stride, encoded when the Episode ends, carried in its summary) and published by
``score()`` as bulk artifacts of the Episodes the options choose."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import msgspec
import numpy as np

from evopolicygym.benchmark.contract import Artifact, BenchmarkError, EpisodeRecord
from evopolicygym.benchmark.video import (
    VIDEO_KEY,
    FrameSampler,
    VideoOptions,
    encode_video,
    video_suffix,
)

__all__ = ["FrameSource", "PublishedVideos", "Recorder", "published_videos"]

# A module-level function drawing the environment's current state as H x W x 3 uint8, or
# returning a callable that draws a snapshot of it later (see FrameSampler).
FrameSource = Callable[
    [gymnasium.Env[Any, Any]], "np.ndarray[Any, Any] | Callable[[], np.ndarray[Any, Any]]"
]


class Recorder:
    """One Episode's video: frames offered at reset and after each step, encoded at the end."""

    def __init__(
        self, env: gymnasium.Env[Any, Any], options: VideoOptions, frame: FrameSource | None
    ) -> None:
        self.options = options
        render: Callable[[], Any] = (lambda: frame(env)) if frame else env.render
        self.sampler = FrameSampler(options.max_frames, render)

    def encoded(self, steps: int) -> dict[str, Any]:
        frames = self.sampler.finish(steps)
        data, media_type = encode_video(frames, self.options)
        return {"data": data, "media_type": media_type, "frames": len(frames)}


class PublishedVideos(msgspec.Struct, frozen=True):
    artifacts: tuple[Artifact, ...] = ()
    listing: list[dict[str, Any]] = []


def _chosen(returns: list[float | None], options: VideoOptions) -> list[tuple[int, str]]:
    """(position, role) of the Episodes that get a video; ``returns`` holds None where an
    Episode has no video."""
    present = [i for i, r in enumerate(returns) if r is not None]
    if options.episodes == "all":
        return [(i, "episode") for i in present]
    if not present:
        return []
    best = max(present, key=lambda i: (returns[i], -i))
    worst = min(present, key=lambda i: (returns[i], i))
    return [(best, "best")] if best == worst else [(best, "best"), (worst, "worst")]


def published_videos(
    records: Sequence[EpisodeRecord],
    episode_return: Callable[[EpisodeRecord], float],
    options: VideoOptions | None,
) -> tuple[list[EpisodeRecord], PublishedVideos]:
    """The records without their video key, and the videos ``options`` publish."""
    plain: list[EpisodeRecord] = []
    found: list[dict[str, Any] | None] = []
    for record in records:
        video = record.summary.get(VIDEO_KEY)
        if video is not None:
            record = msgspec.structs.replace(
                record, summary={k: v for k, v in record.summary.items() if k != VIDEO_KEY}
            )
        plain.append(record)
        found.append(video if isinstance(video, dict) else None)
    if options is None or not any(found):
        return plain, PublishedVideos()
    returns = [
        None if video is None else episode_return(record)
        for record, video in zip(plain, found, strict=True)
    ]
    artifacts: list[Artifact] = []
    listing: list[dict[str, Any]] = []
    for position, role in _chosen(returns, options):
        video = found[position]
        assert video is not None
        suffix = video_suffix(str(video["media_type"]))
        name = (
            f"video-episode-{position:03d}.{suffix}"
            if role == "episode"
            else f"video-{role}.{suffix}"
        )
        data = video["data"]
        if not isinstance(data, bytes):
            raise BenchmarkError("video: an Episode's video must be bytes")
        artifacts.append(
            Artifact(name=name, media_type=str(video["media_type"]), data=data, retention="bulk")
        )
        listing.append(
            {
                "artifact": name,
                "episode": position,
                "role": role,
                "return": returns[position],
                "frames": video.get("frames"),
                "bytes": len(data),
            }
        )
    return plain, PublishedVideos(tuple(artifacts), listing)
