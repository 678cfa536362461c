"""The training environment with its Episodes on Ray: the same rollout gives the same
Feedback, Assessment and reward as on the local executor (a placement, never a condition).

Skipped where Ray is not installed, failed instead under EVOPOLICY_REQUIRE_RAY=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from evopolicygym.records import open_store
from evopolicygym.run import load_run
from evopolicygym.training import PolicyEvolutionEnv
from tests.support.rayutil import local_ray
from tests.support.training import cartpole_row


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    with local_ray(num_cpus=2):
        yield


EDITED = (
    "class P:\n"
    "    def act(self, obs):\n"
    "        return 1 if obs[2] + 0.5 * obs[3] > 0 else 0\n\n"
    "def make_policy(context):\n"
    "    return P()\n"
)


def rollout(store: Path, executor: str) -> tuple[dict[str, Any], float, float | None]:
    env = PolicyEvolutionEnv(
        store=store, executor=executor, validation_episodes=2, assessment_episodes=4, jobs=1
    )
    env.reset(**cartpole_row())
    env.write_file("program/policy.py", EDITED)
    feedback = msgspec.json.decode(env.submit("0:2"))
    env.finish([1])
    reward = env.get_reward()
    (info,) = open_store(store).events.streams("run-")
    state = load_run(open_store(store), info.stream_id.removeprefix("run-"))[0]
    return feedback, reward, state.assessment_score


def test_a_rollout_on_ray_is_the_local_rollout(cluster: None, tmp_path: Path) -> None:
    local = rollout(tmp_path / "local", "local")
    remote = rollout(tmp_path / "ray", "ray")
    assert remote[0]["score"] == local[0]["score"]
    assert remote[0]["episodes"] == local[0]["episodes"]
    assert remote[1:] == local[1:]
    assert local[2] is not None
