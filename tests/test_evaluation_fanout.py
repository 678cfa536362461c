"""Fan-out of an evaluation: the calling thread plays Episodes beside its runner processes.

What jobs > 1 changes is where Episodes run, never what they record.
"""

from __future__ import annotations

import pickle
import textwrap
from typing import Any

import msgspec
import numpy as np
from toybench import CounterBenchmark

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator, evaluate
from evopolicygym.evaluation.runner import RunnerProcess
from evopolicygym.program import Program
from evopolicygym_classic import cartpole

NOISY = """
import random
class P:
    def act(self, o):
        return 1 if o[3] + random.gauss(0, 0.3) > 0 else 0
def make_policy(c):
    return P()
"""


GOOD = """
class Policy:
    def act(self, obs):
        return 1 if obs[0] < obs[1] else 0
def make_policy(context):
    return Policy()
"""


def program(source: str) -> Program:
    return Program.from_files({"policy.py": textwrap.dedent(source)})


def _exact(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.str, "shape": list(value.shape), "bytes": value.tobytes().hex()}
    if isinstance(value, np.generic):
        return {"dtype": value.dtype.str, "bytes": value.tobytes().hex()}
    raise TypeError(type(value))


def untimed(result: EvaluationResult) -> bytes:
    """The records, every value's bytes and type included, their wall times left out."""
    return msgspec.json.encode([msgspec.structs.replace(r, duration_s=0.0) for r in result.records], enc_hook=_exact)


def test_records_are_the_same_for_one_and_two_jobs_warm_and_one_shot() -> None:
    prog = program(NOISY)
    config = EvaluationConfig(episodes=7, seed=4, trace_steps=1000)
    with Evaluator() as evaluator:
        one = evaluator.evaluate(prog, cartpole(), msgspec.structs.replace(config, jobs=1))
        warm = [evaluator.evaluate(prog, cartpole(), msgspec.structs.replace(config, jobs=2)) for _ in range(2)]
    fresh = evaluate(prog, cartpole(), msgspec.structs.replace(config, jobs=2))
    expected = untimed(one)
    assert len({r.total_reward for r in one.records}) > 1
    assert all(r.trace for r in one.records)
    for two in (*warm, fresh):
        assert two.jobs == 2
        assert untimed(two) == expected
        assert two.feedback == one.feedback


def test_two_jobs_with_one_episode_and_many() -> None:
    with Evaluator() as evaluator:
        for episodes in (1, 2, 9):
            result = evaluator.evaluate(program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=episodes, jobs=2))
            assert [e.index for e in result.episodes] == list(range(episodes))
            assert all(e.status == "ok" for e in result.episodes)


def test_a_runner_closed_while_booting_is_stopped_not_waited_for() -> None:
    runner = RunnerProcess()
    runner.close()  # at once: it is still importing
    assert runner.process.returncode is not None
    assert not runner.alive


def test_a_booted_runner_answers_after_its_hello() -> None:
    runner = RunnerProcess(benchmark_blob=pickle.dumps(CounterBenchmark()))
    try:
        assert runner.wait_ready(lambda: False)
        assert runner.ready
        assert runner.call("release") is None  # nothing set up: a no-op
    finally:
        runner.close()
    assert not runner.alive
