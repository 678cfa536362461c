"""Episode videos: frames kept at a doubling stride, encoded within bounds (MP4 with the video
extra, animated WebP without), the best and worst Episode published as bulk artifacts, and
`evaluate --videos` writing one per Episode; recording never changes an Episode."""

from __future__ import annotations

import base64
import io
import re
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from evopolicygym.benchmark import (
    BenchmarkError,
    EpisodeRecord,
    EpisodeSpec,
    FrameSampler,
    GymnasiumBenchmark,
    VideoOptions,
    encode_video,
)
from evopolicygym.benchmark.gymnasium_adapter.videos import published_videos
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from tests.support.cli import invoke
from tests.support.requires import require_extra

ENV_ID = "evopolicygym-test/Painter-v0"


class Painter(gymnasium.Env[np.ndarray, int]):
    """A 1-D walk whose frame paints the walker's position: frames differ step to step."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Box(0, 63, (1,), dtype=np.int64)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.position = 32

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(16, 48))
        return np.array([self.position]), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.position = min(63, max(0, self.position + (1 if action else -1)))
        done = self.position in (0, 63)
        return np.array([self.position]), float(self.position) / 64, done, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((32, 64, 3), dtype=np.uint8)
        frame[:, self.position] = (255, 200, 0)
        return frame


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=Painter, max_episode_steps=300)


def painter(**options: Any) -> GymnasiumBenchmark:
    return GymnasiumBenchmark(ENV_ID, benchmark_id="painter", failure_return=0.0, **options)


POLICY = """
import random
def make_policy(context):
    rng = random.Random(context.policy_seed)
    class P:
        def act(self, observation):
            return rng.randrange(2)
    return P()
"""


def _webp_frames(data: bytes) -> int:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "WEBP"
        return int(getattr(image, "n_frames", 1))


def _mp4_frames(data: bytes, tmp_path: Path) -> int:
    import imageio_ffmpeg

    path = tmp_path / "decoded.mp4"
    path.write_bytes(data)
    reader = imageio_ffmpeg.read_frames(str(path))
    next(reader)  # the metadata
    return sum(1 for _ in reader)


@settings(max_examples=60, deadline=None)
@given(steps=st.integers(min_value=0, max_value=5000), limit=st.integers(min_value=2, max_value=64))
def test_sampler_keeps_a_bounded_even_spread_first_and_last(steps: int, limit: int) -> None:
    rendered: list[int] = []
    t = 0

    def render() -> np.ndarray:
        rendered.append(t)
        return np.full((2, 2, 3), t % 256, dtype=np.uint8)

    sampler = FrameSampler(limit, render)
    for t in range(steps + 1):
        sampler.offer(t)
    frames = sampler.finish(steps)
    kept = [s for s, _ in sampler.frames]
    assert len(frames) == len(kept) <= limit + 1  # the last step may come on top
    assert kept[0] == 0 and kept[-1] == steps
    gaps = {b - a for a, b in pairwise(kept[:-1])}
    assert gaps <= {sampler.stride}  # evenly spread but for the last frame
    # Only frames that were kept at the time were ever rendered: a bounded cost.
    assert len(rendered) <= 2 * limit * (1 + max(steps, 1).bit_length())


def test_webp_encodes_every_frame_and_fits_the_bound() -> None:
    frames = [np.full((24, 40, 3), i * 20, dtype=np.uint8) for i in range(10)]
    data, media_type = encode_video(frames, VideoOptions(format="webp"))
    assert media_type == "image/webp" and _webp_frames(data) == 10
    noise = np.random.default_rng(0).integers(0, 256, (40, 96, 128, 3), dtype=np.uint8)
    bounded, _ = encode_video(list(noise), VideoOptions(format="webp", max_bytes=60_000))
    assert len(bounded) <= 60_000 and 1 <= _webp_frames(bounded) < 40
    with pytest.raises(BenchmarkError, match="H x W x 3"):
        encode_video([np.zeros((4, 4, 5), dtype=np.uint8)], VideoOptions(format="webp"))


def test_mp4_with_the_video_extra_decodes_to_its_frames(tmp_path: Path) -> None:
    require_extra("video", "imageio_ffmpeg")
    frames = [np.full((31, 45, 3), i * 8, dtype=np.uint8) for i in range(30)]
    data, media_type = encode_video(frames, VideoOptions(format="mp4"))
    assert media_type == "video/mp4" and data[4:8] == b"ftyp"
    assert _mp4_frames(data, tmp_path) == 30
    assert encode_video(frames, VideoOptions(format="mp4"))[0] == data  # same frames, same bytes


def _record(index: int, total: float, video: bytes | None) -> EpisodeRecord:
    summary: dict[str, Any] = {"termination": "terminated"}
    if video is not None:
        summary["video"] = {"data": video, "media_type": "image/webp", "frames": 3}
    return EpisodeRecord(
        spec=EpisodeSpec(split="train", index=index, seed=index),
        policy_seed=0,
        status="ok",
        total_reward=total,
        steps=3,
        summary=summary,
    )


def test_best_and_worst_are_published_and_the_key_leaves_every_record() -> None:
    records = [_record(0, 1.0, b"a"), _record(1, 5.0, b"b"), _record(2, -2.0, b"c")]
    plain, videos = published_videos(records, lambda r: r.total_reward, VideoOptions())
    assert all("video" not in r.summary for r in plain)
    assert [(a.name, a.data, a.retention) for a in videos.artifacts] == [
        ("video-best.webp", b"b", "bulk"),
        ("video-worst.webp", b"c", "bulk"),
    ]
    assert [(v["episode"], v["role"]) for v in videos.listing] == [(1, "best"), (2, "worst")]
    _, every = published_videos(records, lambda r: r.total_reward, VideoOptions(episodes="all"))
    assert [a.name for a in every.artifacts] == [f"video-episode-00{i}.webp" for i in range(3)]
    _, none = published_videos(records, lambda r: r.total_reward, None)
    assert none.artifacts == ()


def test_recording_adds_videos_and_changes_no_episode(tmp_path: Path) -> None:
    program = tmp_path / "walker"
    program.mkdir()
    (program / "policy.py").write_text(POLICY)
    config = EvaluationConfig(split="train", episodes=3, seed=0, jobs=1, trace_steps=0)
    with Evaluator() as evaluator:
        plain = evaluator.evaluate(Program.from_directory(program), painter(), config)
        filmed = evaluator.evaluate(
            Program.from_directory(program),
            painter().with_videos(VideoOptions(format="webp", max_frames=16)),
            config,
        )
    assert [(e.total_reward, e.steps) for e in filmed.episodes] == [
        (e.total_reward, e.steps) for e in plain.episodes
    ]
    assert filmed.feedback.score == plain.feedback.score
    assert not [a for a in plain.feedback.artifacts if a.name.startswith("video")]
    videos = {a.name: a for a in filmed.feedback.artifacts if a.name.startswith("video")}
    assert set(videos) <= {"video-best.webp", "video-worst.webp"} and videos
    listing = filmed.feedback.content["videos"]
    returns = [e["return"] for e in filmed.feedback.content["episodes"]]
    assert listing[0]["role"] == "best" and listing[0]["return"] == max(returns)
    for entry in listing:
        frames = _webp_frames(videos[entry["artifact"]].data)
        # WebP folds identical consecutive frames into one shown longer.
        assert 2 <= frames <= entry["frames"] <= 17
    assert all("video" not in e.get("summary", {}) for e in filmed.feedback.content["episodes"])


def test_evaluate_videos_writes_one_per_episode(tmp_path: Path) -> None:
    require_extra("minigrid", "evopolicygym_minigrid")
    out = tmp_path / "videos"
    result = invoke(
        "evaluate",
        "baseline",
        "--benchmark",
        "minigrid_doorkey",
        "--param",
        "profile=8x8",
        "--episodes",
        "3",
        "--videos",
        str(out),
        "--video-frames",
        "20",
    )
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in out.iterdir())
    assert [Path(n).stem for n in written] == ["episode-000", "episode-001", "episode-002"]
    for path in out.iterdir():
        data = path.read_bytes()
        assert 0 < len(data) <= VideoOptions().max_bytes
        count = _mp4_frames(data, tmp_path) if path.suffix == ".mp4" else _webp_frames(data)
        assert 5 <= count <= 21
    assert "wrote 3 videos" in result.stderr


def test_evaluate_videos_of_a_benchmark_without_frames_is_one_line(tmp_path: Path) -> None:
    require_extra("cards", "evopolicygym_cards")
    result = invoke("evaluate", "baseline", "--benchmark", "leduc", "--videos", str(tmp_path / "v"))
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: leduc does not render videos"


# One short task per family that renders, with what it needs beyond its own extra (classic
# control draws with pygame, which the box2d extra brings).
RENDERING = (
    ("cartpole", "box2d", "pygame"),
    ("lunar-lander", "box2d", "evopolicygym_box2d"),
    ("reacher5", "mujoco", "evopolicygym_mujoco"),
    ("minigrid_doorkey", "minigrid", "evopolicygym_minigrid"),
    ("roundabout", "driving", "evopolicygym_driving"),
    ("fetch_push", "robotics", "evopolicygym_robotics"),
)


@pytest.mark.parametrize(("task", "extra", "module"), RENDERING, ids=[r[0] for r in RENDERING])
def test_every_rendering_family_films_an_episode(task: str, extra: str, module: str) -> None:
    require_extra(extra, module)
    from evopolicygym.registry import baseline_dir, load_benchmark

    benchmark = load_benchmark(task).with_videos(  # type: ignore[attr-defined]
        VideoOptions(episodes="all", max_frames=12, format="webp")
    )
    config = EvaluationConfig(split="assessment", episodes=1, seed=0, jobs=1, trace_steps=0)
    with Evaluator() as evaluator:
        result = evaluator.evaluate(
            Program.from_directory(baseline_dir(benchmark)), benchmark, config
        )
    (video,) = [a for a in result.feedback.artifacts if a.name == "video-episode-000.webp"]
    assert 4 <= _webp_frames(video.data) <= 13
    with Image.open(io.BytesIO(video.data)) as image:
        assert min(image.size) >= 32


def test_the_report_embeds_the_best_and_latest_submissions_videos(tmp_path: Path) -> None:
    from evopolicygym.records.events import ArtifactRef
    from evopolicygym.records.location import open_store
    from evopolicygym.report.videos import VIDEO_SUBMISSIONS, videos_markup

    frames = [np.full((8, 8, 3), i * 30, dtype=np.uint8) for i in range(4)]
    data, media_type = encode_video(frames, VideoOptions(format="webp"))
    with open_store(tmp_path / "store", create=True) as store:
        blob = store.blobs.put(data)

        def ref(name: str, digest: str = blob) -> ArtifactRef:
            return ArtifactRef(
                name=name, media_type=media_type, retention="bulk", blob=digest, size=len(data)
            )

        lost = "sha256:" + "0" * 64
        videos = {i: [ref("video-best.webp")] for i in range(1, 8)}
        videos[2] = [ref("video-best.webp"), ref("video-worst.webp", lost)]
        page = videos_markup(videos, best=2, store=store)
    headings = re.findall(r"<h3>Submission (\d+)", page)
    assert headings == ["2", "7", "6", "5"][:VIDEO_SUBMISSIONS]  # best, latest, then back
    assert page.count(f"data:image/webp;base64,{base64.b64encode(data).decode()}") == 4
    assert "video-worst.webp: not kept (retention)" in page
    assert f"{VIDEO_SUBMISSIONS} of 7 Submissions with videos shown" in page
