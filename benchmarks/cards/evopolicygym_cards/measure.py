"""Measure a policy program on a card Benchmark in this process: the figures in its metadata.

``play`` runs one Episode with a program's ``make_policy`` called in-process (no worker, no
sandbox), seeding ``random`` from the policy seed as the Host's policy worker does, so its
return is the one the Host would record for that Episode and policy seed. ``measure`` plays
the baseline and the uniformly random program on the same assessment Episodes and policy
seeds ``evaluate(program, benchmark, EvaluationConfig(split="assessment", seed=0, episodes=300))``
would use. ``python -m evopolicygym_cards.measure`` prints them for every game and profile.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import EpisodeSpec, derive_seed
from evopolicygym_cards.benchmark import BASELINES_DIR, CardGameBenchmark
from evopolicygym_cards.opponents import PROFILES

__all__ = ["MEASURE_EPISODES", "MEASURE_SEED", "load_policy", "measure", "play", "policy_seed"]

MEASURE_SEED = 0
MEASURE_EPISODES = 300
RANDOM_DIR = BASELINES_DIR / "random"

PolicyMaker = Callable[[Any], Any]


def load_policy(program_dir: Path) -> PolicyMaker:
    """The ``make_policy`` of ``program_dir/policy.py``, imported under a private name."""
    path = Path(program_dir) / "policy.py"
    name = f"_cards_policy_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    make_policy: PolicyMaker = module.make_policy
    return make_policy


def policy_seed(
    benchmark: CardGameBenchmark, episode: EpisodeSpec, seed: int = MEASURE_SEED
) -> int:
    """The policy seed ``evaluate()`` gives the Episode (the evaluation engine's derivation)."""
    return derive_seed("policy", benchmark.spec.id, episode.split, seed, episode.index)


def play(
    benchmark: CardGameBenchmark, make_policy: PolicyMaker, episode: EpisodeSpec, seed: int
) -> float:
    """One Episode's return, the policy made fresh for it."""
    spec = benchmark.spec
    random.seed(seed)
    context = types.SimpleNamespace(
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        policy_seed=seed,
        metadata=spec.metadata,
        environment_parameters=spec.environment_parameters,
    )
    policy = make_policy(context)
    env = benchmark.make_environment(episode)
    total = 0.0
    try:
        observation = env.reset()
        for _ in range(spec.max_episode_steps):
            result = env.step(benchmark.validate_action(policy.act(observation)))
            total += result.reward
            observation = result.observation
            if result.terminated or result.truncated:
                break
    finally:
        env.close()
    return total


def measure(
    benchmark: CardGameBenchmark, episodes: int = MEASURE_EPISODES, split: str = "assessment"
) -> dict[str, Any]:
    """Mean chips per Episode of the baseline and of the random program, on the same Episodes."""
    planned = benchmark.plan(split, MEASURE_SEED, episodes)
    figures: dict[str, Any] = {"split": split, "seed": MEASURE_SEED, "episodes": episodes}
    for name, directory in (("baseline", benchmark.baseline_dir()), ("random", RANDOM_DIR)):
        make_policy = load_policy(directory)
        returns = [play(benchmark, make_policy, e, policy_seed(benchmark, e)) for e in planned]
        figures[name] = round(statistics.fmean(returns), 4)
        figures[f"{name}_std"] = round(statistics.pstdev(returns), 4)
    return figures


def main() -> None:
    for game, profiles in PROFILES.items():
        for opponent in profiles:
            benchmark = CardGameBenchmark(game, profile=opponent)
            print(f'    ("{game}", "{opponent}", {benchmark.hands}): {measure(benchmark)},')


if __name__ == "__main__":
    main()
