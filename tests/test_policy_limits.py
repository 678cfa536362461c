"""Deadlines are enforced: the wall-clock Episode deadline whatever a policy's pace (issue 13, item 3)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from toybench import CounterBenchmark

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.program import Program

GOOD = """
class Policy:
    def act(self, obs):
        return 1 if obs[0] < obs[1] else 0

def make_policy(context):
    return Policy()
"""


def program(source: str) -> Program:
    return Program.from_files({"policy.py": textwrap.dedent(source)})


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator() as ev:
        yield ev


def evaluate(evaluator: Evaluator, source: str, horizon: int = 20, **config) -> EvaluationResult:
    settings = {"episodes": 1, "jobs": 1, "episode_timeout": 5.0, **config}
    return evaluator.evaluate(program(source), CounterBenchmark(horizon=horizon), EvaluationConfig(**settings))


# --- the Episode deadline --------------------------------------------------------------------

PACED = """
import time
class P:
    def act(self, o):
        time.sleep({pause})
        return 0  # never reaches the target: only the deadline ends the Episode
def make_policy(c):
    return P()
"""


@pytest.mark.parametrize("pause", [0.045, 0.05])
@pytest.mark.timeout(60)  # a hang guard: before, these ran for the Environment's whole horizon
def test_the_deadline_holds_however_a_policy_paces_its_answers(evaluator: Evaluator, pause: float) -> None:
    # Each answer comes back within (or right at) the Host's 50 ms receive slice: before,
    # the deadline was only looked at when a slice came back empty, so the policy played on.
    result = evaluate(evaluator, PACED.format(pause=pause), episode_timeout=1.0, horizon=10_000_000)
    episode = result.episodes[0]
    assert episode.status == "timeout", episode
    assert "deadline" in (episode.failure or "")
    # Every act() takes at least `pause`: no more of them fit in the 1 s budget.
    assert episode.steps <= int(1.0 / pause), episode
    assert episode.duration_s < 3.0, episode  # a generous bound: it ends at about 1 s


def test_a_paced_policy_within_its_deadline_finishes(evaluator: Evaluator) -> None:
    # At most 8 acts of 30 ms to reach the target: about a quarter of the 1 s budget.
    result = evaluate(evaluator, PACED.format(pause=0.03).replace("return 0", "return 1"), episode_timeout=1.0)
    assert result.episodes[0].status == "ok", result.episodes[0]
