"""Fan-out of an evaluation: the calling thread plays Episodes beside its runner processes.

What jobs > 1 changes is where Episodes run, never what they record.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgspec
import numpy as np

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator, evaluate
from evopolicygym.evaluation.forkserver import ForkServer
from evopolicygym.evaluation.runner import RunnerProcess
from evopolicygym_classic import cartpole
from tests.support.policies import GOOD, program
from tests.support.toybench import CounterBenchmark

NOISY = """
import random
class P:
    def act(self, o):
        return 1 if o[3] + random.gauss(0, 0.3) > 0 else 0
def make_policy(c):
    return P()
"""


def _exact(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {
            "dtype": value.dtype.str,
            "shape": list(value.shape),
            "bytes": value.tobytes().hex(),
        }
    if isinstance(value, np.generic):
        return {"dtype": value.dtype.str, "bytes": value.tobytes().hex()}
    raise TypeError(type(value))


def untimed(result: EvaluationResult) -> bytes:
    """The records, every value's bytes and type included, their wall times left out."""
    return msgspec.json.encode(
        [msgspec.structs.replace(r, duration_s=0.0) for r in result.records], enc_hook=_exact
    )


def test_records_are_the_same_for_one_and_two_jobs_warm_and_one_shot() -> None:
    prog = program(NOISY)
    config = EvaluationConfig(episodes=7, seed=4, trace_steps=1000)
    with Evaluator() as evaluator:
        one = evaluator.evaluate(prog, cartpole(), msgspec.structs.replace(config, jobs=1))
        warm = [
            evaluator.evaluate(prog, cartpole(), msgspec.structs.replace(config, jobs=2))
            for _ in range(2)
        ]
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
            result = evaluator.evaluate(
                program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=episodes, jobs=2)
            )
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


def test_a_warmed_evaluator_uses_the_server_it_started_and_records_the_same() -> None:
    prog = program(NOISY)
    config = EvaluationConfig(episodes=3, seed=2, jobs=1, trace_steps=1000)
    with Evaluator() as cold:
        expected = untimed(cold.evaluate(prog, cartpole(), config))
    evaluator = Evaluator()
    evaluator.warm()
    evaluator.warm()  # once is enough: a second call starts nothing more
    assert evaluator._warming is not None
    evaluator._warming.join(timeout=60)
    server = evaluator._fork_server
    assert server is not None and server._process.poll() is None
    assert untimed(evaluator.evaluate(prog, cartpole(), config)) == expected
    assert evaluator.fork_server is server  # the warmed one served the evaluation
    evaluator.close()
    assert server._process.poll() is not None


def test_closing_while_warming_leaves_no_server(monkeypatch: Any) -> None:
    import evopolicygym.evaluation.engine as engine

    made: list[Any] = []

    def recorded() -> Any:
        server = ForkServer()
        made.append(server)
        return server

    monkeypatch.setattr(engine, "ForkServer", recorded)
    for _ in range(3):
        evaluator = Evaluator()
        evaluator.warm()
        evaluator.close()  # at once: the start under way is waited for, then closed
        assert evaluator._fork_server is None and evaluator._warming is None
    assert len(made) == 3
    assert all(server._process.poll() is not None for server in made)


def test_a_warm_start_that_fails_fails_the_first_evaluation(monkeypatch: Any) -> None:
    import evopolicygym.evaluation.engine as engine
    from evopolicygym.evaluation.forkserver import ForkServerError

    calls: list[int] = []

    def refuse() -> Any:
        calls.append(1)
        raise ForkServerError("containment cannot be set up")

    monkeypatch.setattr(engine, "ForkServer", refuse)
    evaluator = Evaluator()
    evaluator.warm()
    assert evaluator._warming is not None
    evaluator._warming.join(timeout=60)
    try:
        evaluator.evaluate(program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=1, jobs=1))
    except ForkServerError as exc:
        assert "containment cannot be set up" in str(exc)
    else:
        raise AssertionError("the evaluation ran without a fork server")
    finally:
        evaluator.close()
    assert len(calls) == 2  # the warm start, and the evaluation's own
