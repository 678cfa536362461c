"""Cross-process determinism of every family of the catalog: the same program, Benchmark and
seed give identical Episodes (status, return, steps and a digest over every observation and
action) in two separate interpreters with different hash seeds. The long-horizon families
(nethack, crafter, textworld) test the same in their own files, each with its own caches.

One task per family, its baseline program, two Episodes of the assessment split."""

from __future__ import annotations

import pytest

from evopolicygym.registry import baseline_dir, load_benchmark
from tests.support.determinism import fingerprints
from tests.support.requires import require_extra

# (family, task, --param values): a short profile where the default is long.
CASES = (
    ("classic", "cartpole", {}),
    ("classic", "frozen-lake", {}),
    ("box2d", "lunar-lander", {}),
    ("mujoco", "reacher5", {}),
    ("minigrid", "minigrid_doorkey", {"profile": "8x8"}),
    ("driving", "roundabout", {}),
    ("robotics", "fetch_push", {}),
    ("cards", "leduc", {}),
)


@pytest.mark.parametrize(("family", "task", "params"), CASES, ids=[c[1] for c in CASES])
def test_two_interpreters_play_the_same_episodes(
    family: str, task: str, params: dict[str, str]
) -> None:
    if family != "classic":
        require_extra(family, f"evopolicygym_{family}")
    program = baseline_dir(load_benchmark(task, params))
    assert program is not None
    first = fingerprints(task, program, params=params, hash_seed="1")
    second = fingerprints(task, program, params=params, hash_seed="2")
    assert first == second
    assert len(first) == 2 and all(row["status"] == "ok" for row in first)
    assert all(isinstance(row["digest"], str) and len(row["digest"]) == 64 for row in first)
    # Two Episodes of a split are two different Episodes, not one replayed.
    assert first[0]["digest"] != first[1]["digest"]
