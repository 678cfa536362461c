"""Cross-process determinism: the same program, Benchmark and seed give identical Episodes in
two separate interpreters with different hash seeds.

``fingerprints`` evaluates a program in a fresh interpreter (``PYTHONHASHSEED`` as given, its
own environment variables, e.g. a private cache directory) and returns, per Episode, its
status, return, steps and a SHA-256 over every observation and action that crossed the
Policy boundary, in order, as the wire codec encodes them. The digest is computed in the
Host as the Episode runs (a wrapping Benchmark), so an Episode of thousands of steps needs no
trace kept in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import Benchmark, EpisodeSpec, StepResult, encode_value

__all__ = ["DIGEST_KEY", "DigestingBenchmark", "fingerprints"]

ROOT = Path(__file__).resolve().parents[2]
DIGEST_KEY = "determinism_digest"


class _DigestingEnvironment:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._hash = hashlib.sha256()

    def _feed(self, tag: bytes, value: Any) -> None:
        data = encode_value(value)
        self._hash.update(tag + len(data).to_bytes(8, "big") + data)

    def reset(self) -> Any:
        observation = self._inner.reset()
        self._feed(b"o", observation)
        return observation

    def step(self, action: Any) -> StepResult:
        self._feed(b"a", action)
        result: StepResult = self._inner.step(action)
        self._feed(b"o", result.observation)
        self._feed(b"r", [result.reward, result.terminated, result.truncated])
        return result

    def summary(self) -> dict[str, Any]:
        found = getattr(self._inner, "summary", None)
        fields = dict(found()) if found is not None else {}
        fields[DIGEST_KEY] = self._hash.hexdigest()
        return fields

    def close(self) -> None:
        self._inner.close()


class DigestingBenchmark:
    """``inner`` with every Environment hashing what crosses the Policy boundary; the digest
    lands in each EpisodeRecord's summary under ``DIGEST_KEY``."""

    def __init__(self, inner: Benchmark) -> None:
        self._inner = inner

    def make_environment(self, episode: EpisodeSpec) -> _DigestingEnvironment:
        return _DigestingEnvironment(self._inner.make_environment(episode))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def _child(arguments: str) -> None:
    from evopolicygym.evaluation import EvaluationConfig, Evaluator
    from evopolicygym.program import Program
    from evopolicygym.registry import load_benchmark

    given = json.loads(arguments)
    benchmark = DigestingBenchmark(load_benchmark(given["benchmark"], given["params"]))
    config = EvaluationConfig(
        split=given["split"],
        episodes=given["episodes"],
        seed=given["seed"],
        jobs=1,  # in this interpreter: the wrapper need not pickle into runners
        trace_steps=0,
        episode_timeout=given["episode_timeout"],
    )
    with Evaluator() as evaluator:
        result = evaluator.evaluate(
            Program.from_directory(Path(given["program"])),
            benchmark,  # type: ignore[arg-type]
            config,
        )
    rows = [
        {
            "status": r.status,
            "failure": r.failure,
            "return": r.total_reward,
            "steps": r.steps,
            "digest": r.summary.get(DIGEST_KEY),
        }
        for r in result.records
    ]
    print(json.dumps(rows))


def fingerprints(
    benchmark: str,
    program: Path,
    *,
    params: dict[str, str] | None = None,
    split: str = "assessment",
    seed: int = 0,
    episodes: int = 2,
    hash_seed: str = "1",
    env: dict[str, str] | None = None,
    episode_timeout: float = 120.0,
    timeout: float = 600.0,
) -> list[dict[str, Any]]:
    """Per Episode {status, failure, return, steps, digest} of ``program`` on ``benchmark``,
    evaluated in a new interpreter with ``PYTHONHASHSEED=hash_seed`` and ``env`` added."""
    arguments = json.dumps(
        {
            "benchmark": benchmark,
            "program": str(program),
            "params": params or {},
            "split": split,
            "seed": seed,
            "episodes": episodes,
            "episode_timeout": episode_timeout,
        }
    )
    code = "import sys; from tests.support.determinism import _child; _child(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", code, arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": hash_seed, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows
