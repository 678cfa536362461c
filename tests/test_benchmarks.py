"""The packaged Gymnasium Benchmarks and their baseline policies, on real Gymnasium."""

from __future__ import annotations

import importlib
import importlib.util
import math
import pickle
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import evopolicygym_classic as curated
from evopolicygym.benchmark import (
    Benchmark,
    BenchmarkError,
    EpisodeRecord,
    InvalidAction,
    Step,
    check_benchmark,
)
from evopolicygym.benchmark.gymnasium_adapter import GymnasiumBenchmark, make_gymnasium_benchmark
from evopolicygym.policy import PolicyContext
from evopolicygym.seeds import derive_seed
from evopolicygym.values import decode_value, encode_value
from tests.support.requires import require_extra


def _lunar_lander() -> GymnasiumBenchmark:
    box2d = _family("box2d")
    return box2d.lunar_lander()  # type: ignore[no-any-return]


CURATED: dict[str, Callable[[], GymnasiumBenchmark]] = {
    "cartpole": curated.cartpole,
    "frozen-lake": curated.frozen_lake,
    "acrobot": curated.acrobot,
    "mountain-car-continuous": curated.mountain_car_continuous,
    "lunar-lander": _lunar_lander,
}


def _family(name: str) -> Any:
    """The family distribution ``evopolicygym_<name>``; a test needing one that is not
    installed skips saying how to install it (fails when extras are required)."""
    require_extra(name, f"evopolicygym_{name}", *(["Box2D"] if name == "box2d" else []))
    return importlib.import_module(f"evopolicygym_{name}")


def build(benchmark_id: str) -> GymnasiumBenchmark:
    """The curated Benchmark, from its family."""
    return CURATED[benchmark_id]()


@pytest.fixture(params=list(CURATED))
def curated_benchmark(request: pytest.FixtureRequest) -> GymnasiumBenchmark:
    return build(request.param)


# --- conformance and the spec ----------------------------------------------------------------


def test_conformance_curated(curated_benchmark: GymnasiumBenchmark) -> None:
    assert isinstance(curated_benchmark, Benchmark)
    report = check_benchmark(curated_benchmark)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert report.benchmark_id == curated_benchmark.spec.id


def test_conformance_generic_gymnasium() -> None:
    benchmark = make_gymnasium_benchmark("CartPole-v1")
    assert benchmark.spec.id == "gymnasium:CartPole-v1"
    report = check_benchmark(benchmark)
    assert report.ok, [c for c in report.checks if not c.ok]


def test_curated_ids_and_baselines(curated_benchmark: GymnasiumBenchmark) -> None:
    spec = curated_benchmark.spec
    assert spec.id in CURATED
    assert spec.primary_metric == "mean_return"
    assert spec.score_direction == "maximize"
    baseline = curated_benchmark.baseline_dir()
    assert baseline is not None and baseline.name == spec.id
    assert (baseline / "policy.py").is_file()
    assert spec.environment_parameters["max_episode_steps"] == spec.max_episode_steps


def test_spaces_and_spec_are_policy_values(curated_benchmark: GymnasiumBenchmark) -> None:
    spec = curated_benchmark.spec
    for value in (
        spec.observation_space,
        spec.action_space,
        spec.metadata,
        spec.environment_parameters,
    ):
        assert decode_value(encode_value(value)) == value


def test_space_descriptions() -> None:
    cartpole = curated.cartpole().spec
    assert cartpole.action_space == {"type": "discrete", "n": 2, "start": 0}
    obs = cartpole.observation_space
    assert obs["type"] == "box" and obs["shape"] == [4] and obs["dtype"] == "float32"
    assert obs["high"][1] is None  # unbounded cart velocity
    mcc = curated.mountain_car_continuous().spec.action_space
    assert mcc == {"type": "box", "shape": [1], "dtype": "float32", "low": [-1.0], "high": [1.0]}
    assert curated.frozen_lake().spec.observation_space == {"type": "discrete", "n": 16, "start": 0}


def test_space_description_composites() -> None:
    from gymnasium import spaces

    from evopolicygym.benchmark.gymnasium_adapter import describe_space

    space = spaces.Dict(
        {
            "a": spaces.Tuple((spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(3))),
            "b": spaces.Box(low=-np.inf, high=np.inf, shape=(2, 2)),
            "c": spaces.Text(5),
        }
    )
    described = describe_space(space)
    encode_value(described)
    assert described["type"] == "dict"
    assert described["spaces"]["a"]["spaces"][0] == {
        "type": "multi_discrete",
        "nvec": [2, 3],
        "start": [0, 0],
    }
    assert described["spaces"]["a"]["spaces"][1] == {"type": "multi_binary", "n": 3}
    assert described["spaces"]["b"]["low"] == [[None, None], [None, None]]
    assert described["spaces"]["c"]["type"] == "other"


# --- planning ----------------------------------------------------------------------------------


def test_plan_deterministic_and_disjoint_across_splits() -> None:
    benchmark = curated.cartpole()
    train = benchmark.plan("train", 0, 20)
    assert train == benchmark.plan("train", 0, 20)
    assert [e.index for e in train] == list(range(20))
    assert all(e.split == "train" for e in train)
    assert train[0].seed == derive_seed("episode", "cartpole", "train", 0, 0)
    seeds = [{e.seed for e in benchmark.plan(split, 0, 20)} for split in benchmark.splits]
    assert all(len(s) == 20 for s in seeds)
    assert not (seeds[0] & seeds[1]) and not (seeds[0] & seeds[2]) and not (seeds[1] & seeds[2])
    assert {e.seed for e in benchmark.plan("train", 1, 20)}.isdisjoint(seeds[0])
    # A different Benchmark id never shares Episode seeds with this one.
    assert {e.seed for e in curated.acrobot().plan("train", 0, 20)}.isdisjoint(seeds[0])


def test_plan_unknown_split() -> None:
    with pytest.raises(ValueError, match=r"'test'.*train, validation, assessment"):
        curated.cartpole().plan("test", 0, 1)


def test_episode_replays_from_seed() -> None:
    benchmark = curated.frozen_lake()
    episode = benchmark.plan("validation", 3, 1)[0]

    def rollout() -> list[Any]:
        env = benchmark.make_environment(episode)
        frames = [env.reset()]
        for _ in range(30):
            result = env.step(benchmark.validate_action(1))
            frames.append((result.observation, result.reward, result.terminated))
            if result.terminated or result.truncated:
                break
        env.close()
        env.close()  # idempotent
        return frames

    first = rollout()
    assert first == rollout()
    assert type(first[0]) is int


# --- actions -----------------------------------------------------------------------------------


def test_validate_discrete() -> None:
    benchmark = curated.cartpole()
    assert benchmark.validate_action(0) == 0
    assert benchmark.validate_action(1) == 1
    accepted = benchmark.validate_action(np.int64(1))
    assert accepted == 1 and type(accepted) is int
    for bad in (True, False, 2, -1, 1.0, "1", None, object(), [1], float("nan"), np.bool_(True)):
        with pytest.raises(InvalidAction):
            benchmark.validate_action(bad)


def test_validate_box_never_clips() -> None:
    benchmark = curated.mountain_car_continuous()
    high = float(np.float32(1.0))
    for good in ([1.0], [-1.0], (0.5,), 0.25, 1, np.array([0.5], dtype=np.float64),
                 np.array([1], dtype=np.int64), np.float32(-0.5)):  # fmt: skip
        action = benchmark.validate_action(good)
        assert isinstance(action, np.ndarray) and action.dtype == np.float32
        assert action.shape == (1,)
    np.testing.assert_array_equal(benchmark.validate_action([0.25]), np.array([0.25], np.float32))
    just_above = math.nextafter(high, math.inf)
    assert np.float32(just_above) == high  # would round into the space, yet must be rejected
    bad_values: list[Any] = [
        [just_above],
        [1.5],
        [-1.0000001],
        [float("nan")],
        [float("inf")],
        float("nan"),
        [0.1, 0.2],
        [[0.1]],
        [],
        np.zeros((1, 1)),
        np.array([True]),
        [True],
        ["0.5"],
        "0.5",
        None,
        object(),
        {"force": 0.5},
        [None],
        np.array(["a"]),
        [10**400],
    ]
    for bad in bad_values:
        with pytest.raises(InvalidAction):
            benchmark.validate_action(bad)


def test_validate_other_spaces() -> None:
    from gymnasium import spaces

    from evopolicygym.benchmark.gymnasium_adapter.spaces import sample_space
    from evopolicygym.benchmark.gymnasium_adapter.validation import make_validator

    pendulum = make_gymnasium_benchmark("Pendulum-v1")
    assert pendulum.validate_action([2.0]).tolist() == [2.0]
    with pytest.raises(InvalidAction, match="above the upper bound"):
        pendulum.validate_action([2.01])
    with pytest.raises(InvalidAction, match=r"\[0, 2\)"):
        curated.cartpole().validate_action(5)

    space = spaces.Dict(
        {
            "move": spaces.MultiDiscrete([3, 2], start=[-1, 0]),
            "flags": spaces.MultiBinary(2),
            "grid": spaces.Box(0, 9, shape=(2, 2), dtype=np.int64),
            "pick": spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3, start=1))),
        }
    )
    validate = make_validator(space)
    good = {"move": [-1, 1], "flags": [0, 1], "grid": [[0, 9], [3, 4]], "pick": [1, 3]}
    accepted = validate(good)
    assert space.contains(accepted)
    for key, bad in (("move", [2, 0]), ("move", [0.0, 0]), ("flags", [2, 0]), ("flags", [True, 0]),
                     ("grid", [[0, 9], [3, 4.5]]), ("grid", [[0, 10], [3, 4]]), ("pick", [1, 0]),
                     ("pick", [1])):  # fmt: skip
        with pytest.raises(InvalidAction):
            validate({**good, key: bad})
    with pytest.raises(InvalidAction):
        validate({k: v for k, v in good.items() if k != "pick"})
    rng = random.Random(3)
    for _ in range(50):
        assert space.contains(validate(sample_space(space, rng)))

    unbounded = spaces.Box(-np.inf, np.inf, shape=(2,))
    validate = make_validator(unbounded)
    assert validate([1e30, -1e30]).tolist() == [np.float32(1e30), np.float32(-1e30)]
    for bad in ([np.inf, 0.0], [np.nan, 0.0], [0.0, -np.inf]):
        with pytest.raises(InvalidAction, match="non-finite"):
            validate(bad)
    for _ in range(20):
        validate(sample_space(unbounded, rng))


def test_sample_action_is_valid_and_deterministic(curated_benchmark: GymnasiumBenchmark) -> None:
    rng_a, rng_b = random.Random(5), random.Random(5)
    draws = [curated_benchmark.sample_action(rng_a) for _ in range(20)]
    assert all(np.array_equal(a, curated_benchmark.sample_action(rng_b)) for a in draws)
    rng = random.Random(6)
    for _ in range(50):
        curated_benchmark.validate_action(curated_benchmark.sample_action(rng))


# --- pickling ----------------------------------------------------------------------------------


def test_pickle_round_trip(curated_benchmark: GymnasiumBenchmark) -> None:
    fresh = pickle.loads(pickle.dumps(curated_benchmark))
    assert fresh.spec == curated_benchmark.spec
    curated_benchmark.validate_action(curated_benchmark.sample_action(random.Random(0)))
    blob = pickle.dumps(curated_benchmark)  # spaces and validator are now cached
    assert len(blob) < 8_000
    clone = pickle.loads(blob)
    assert clone.spec == curated_benchmark.spec
    assert clone.plan("train", 4, 3) == curated_benchmark.plan("train", 4, 3)
    action = clone.sample_action(random.Random(1))
    assert np.array_equal(clone.validate_action(action), curated_benchmark.validate_action(action))


# --- scoring -----------------------------------------------------------------------------------


def _records(benchmark: GymnasiumBenchmark) -> list[EpisodeRecord]:
    planned = benchmark.plan("train", 9, 4)
    trace = [Step(np.array([0.5], np.float32), -0.025, False, False, np.zeros(2, np.float32))] * 300
    return [
        EpisodeRecord(
            spec=planned[0], policy_seed=derive_seed("policy", 1), status="ok", total_reward=95.0,
            steps=50, terminated=True, trace=trace,
        ),
        EpisodeRecord(
            spec=planned[1], policy_seed=derive_seed("policy", 2), status="ok", total_reward=-10.0,
            steps=999, truncated=True,
        ),
        EpisodeRecord(
            spec=planned[2], policy_seed=derive_seed("policy", 3), status="exception",
            total_reward=40.0, steps=7, failure="ZeroDivisionError: " + "x" * 2000, trace=trace[:3],
        ),
        EpisodeRecord(
            spec=planned[3], policy_seed=derive_seed("policy", 4), status="timeout",
            total_reward=3.0, steps=1, failure="deadline",
        ),
    ]  # fmt: skip


def test_score_uses_failure_return_and_hides_seeds() -> None:
    benchmark = curated.mountain_car_continuous()
    records = _records(benchmark)
    feedback = benchmark.score(records)
    returns = [95.0, -10.0, -100.0, -100.0]
    assert feedback.score == pytest.approx(statistics.fmean(returns))
    content = feedback.content
    encode_value(content)
    assert [e["return"] for e in content["episodes"]] == returns
    assert content["failures"] == {"exception": 1, "timeout": 1}
    assert content["mean_return"] == pytest.approx(feedback.score)
    assert content["std_return"] == pytest.approx(statistics.pstdev(returns))
    assert (content["min_return"], content["max_return"]) == (-100.0, 95.0)
    assert content["success_rate"] == 0.25
    first, _, failed, _ = content["episodes"]
    assert first == {
        "index": 0, "status": "ok", "return": 95.0, "length": 50, "terminated": True,
        "truncated": False, "termination": "terminated", "failure": None, "output_tail": "",
    }  # fmt: skip
    assert len(failed["failure"]) == 500
    blob = msgspec.json.encode(feedback.content)
    for record in records:
        assert str(record.spec.seed).encode() not in blob
        assert str(record.policy_seed).encode() not in blob
    for forbidden in (b"seed", b"scenario", b"policy_seed"):
        assert forbidden not in blob


def test_a_gymnasium_id_derives_its_failure_score_from_reward_bounds() -> None:
    """Failures never win: with no failure_return given, a known environment's worst
    return over its step limit is the failure score, and a completed Episode never
    scores below it."""
    mcc = make_gymnasium_benchmark("MountainCarContinuous-v0")
    assert mcc.spec.failure_score == pytest.approx(-0.1 * 999)
    assert mcc.spec.failure_score < -10.0  # the worst completed return in _records
    feedback = mcc.score(_records(mcc))
    assert [e["return"] for e in feedback.content["episodes"]] == [95.0, -10.0, -99.9, -99.9]
    assert feedback.content["below_failure_score"] == 0
    assert make_gymnasium_benchmark("MountainCar-v0").spec.failure_score == -200.0
    assert (
        make_gymnasium_benchmark("Acrobot-v1", max_episode_steps=100).spec.failure_score == -100.0
    )
    assert make_gymnasium_benchmark("CartPole-v1").spec.failure_score == 0.0
    pendulum = make_gymnasium_benchmark("Pendulum-v1").spec.failure_score
    assert pendulum == pytest.approx(-(math.pi**2 + 6.4 + 0.004) * 200)
    # A given failure return wins over the derived one, and enters the environment digest.
    given = make_gymnasium_benchmark("MountainCar-v0", failure_return="-1000")
    assert given.spec.failure_score == -1000.0
    assert (
        given.spec.environment_digest
        != make_gymnasium_benchmark("MountainCar-v0").spec.environment_digest
    )


def test_a_completed_return_under_the_failure_score_is_scored_at_it() -> None:
    """A failure score that is not truly a bound still never lets a failure win."""
    benchmark = make_gymnasium_benchmark("MountainCarContinuous-v0", failure_return="-5")
    feedback = benchmark.score(_records(benchmark))
    assert [e["return"] for e in feedback.content["episodes"]] == [95.0, -5.0, -5.0, -5.0]
    assert feedback.content["below_failure_score"] == 1
    assert feedback.content["failure_score"] == -5.0


def test_a_gymnasium_id_without_known_bounds_is_not_evaluated_until_given_one(
    tmp_path: Path,
) -> None:
    import gymnasium

    from evopolicygym.evaluation import EvaluationConfig, evaluate
    from evopolicygym.program import Program

    gymnasium.register(
        id="EpgTest/Unbounded-v0",
        entry_point="gymnasium.envs.classic_control:CartPoleEnv",
        max_episode_steps=50,
    )
    unknown = make_gymnasium_benchmark("EpgTest/Unbounded-v0")
    assert unknown.spec.failure_score is None  # described, not evaluated
    program = Program.from_files({"policy.py": "def make_policy(c):\n    return lambda o: 0\n"})
    with pytest.raises(BenchmarkError, match=r"declares no failure score.*--param failure_return="):
        evaluate(program, unknown, EvaluationConfig(episodes=1, jobs=1))
    with pytest.raises(BenchmarkError, match="--param failure_return"):
        unknown.score(_records(unknown))
    given = make_gymnasium_benchmark("EpgTest/Unbounded-v0", failure_return="-3")
    assert given.spec.failure_score == -3.0
    with pytest.raises(BenchmarkError, match="finite"):
        make_gymnasium_benchmark("EpgTest/Unbounded-v0", failure_return="nan")


def test_score_empty() -> None:
    feedback = curated.cartpole().score([])
    assert feedback.score == 0.0 and feedback.artifacts == ()
    assert feedback.content["episodes"] == [] and feedback.content["failures"] == {}


def test_trace_artifact_is_bounded_jsonl() -> None:
    benchmark = curated.mountain_car_continuous()
    records = _records(benchmark)
    (artifact,) = benchmark.score(records).artifacts
    assert artifact.name == "trace.jsonl"
    assert artifact.media_type == "application/jsonl" and artifact.retention == "bulk"
    lines = [msgspec.json.decode(line) for line in artifact.data.splitlines()]
    assert len(lines) == 200 + 3
    assert lines[0] == {
        "episode": 0,
        "t": 0,
        "action": [0.5],
        "reward": -0.025,
        "observation": [0.0, 0.0],
    }
    assert lines[-1]["episode"] == 2 and lines[-1]["t"] == 2
    assert benchmark.score(records[1:2]).artifacts == ()

    big = np.zeros(1000, np.float64)
    heavy = [Step(big, 1.0, False, False, big)] * 200
    heavy_records = [msgspec.structs.replace(records[0], trace=heavy)] * 5
    (bounded,) = benchmark.score(heavy_records).artifacts
    assert len(bounded.data) <= 256 * 1024


# --- construction ------------------------------------------------------------------------------


def test_frozen_lake_config() -> None:
    eight = curated.frozen_lake(map="8x8", slippery="false")
    assert eight.spec.environment_parameters == {
        "map_name": "8x8", "is_slippery": False, "max_episode_steps": 200,
    }  # fmt: skip
    assert eight.spec.observation_space["n"] == 64
    assert len(eight.spec.metadata["map"]) == 8
    assert curated.frozen_lake(slippery="true").make_kwargs["is_slippery"] is True
    assert curated.frozen_lake().spec.environment_digest != eight.spec.environment_digest
    for bad in (dict(map="5x5"), dict(slippery="maybe"), dict(map=4)):
        with pytest.raises(ValueError, match="frozen-lake"):
            curated.frozen_lake(**bad)


def test_unknown_gymnasium_id() -> None:
    with pytest.raises(BenchmarkError, match="NoSuchEnv-v0") as info:
        make_gymnasium_benchmark("NoSuchEnv-v0")
    assert "\n" not in str(info.value)
    with pytest.raises(BenchmarkError, match="no_such_module"):
        make_gymnasium_benchmark("no_such_module:Thing-v0")


def test_generic_parameters_from_cli_strings() -> None:
    benchmark = make_gymnasium_benchmark(
        "FrozenLake-v1", map_name="8x8", is_slippery="false", max_episode_steps="50"
    )
    assert benchmark.spec.environment_parameters == {
        "map_name": "8x8", "is_slippery": False, "max_episode_steps": 50,
    }  # fmt: skip
    assert benchmark.spec.max_episode_steps == 50


# --- baselines -----------------------------------------------------------------------------------


def load_baseline(directory: Path) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"baseline_{directory.name}", directory / "policy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_episode(benchmark: GymnasiumBenchmark, episode: Any, act: Callable[[Any], Any]) -> float:
    env = benchmark.make_environment(episode)
    total = 0.0
    try:
        observation = env.reset()
        for _ in range(benchmark.spec.max_episode_steps):
            result = env.step(benchmark.validate_action(act(observation)))
            total += result.reward
            observation = result.observation
            if result.terminated or result.truncated:
                break
    finally:
        env.close()
    return total


# FrozenLake's rewards are 0/1 and noisy, so it gets more (cheap) Episodes.
BASELINE_EPISODES = {"frozen-lake": 20}


@pytest.mark.parametrize("benchmark_id", list(CURATED))
def test_baseline_beats_random(benchmark_id: str) -> None:
    benchmark = build(benchmark_id)
    directory = benchmark.baseline_dir()
    assert directory is not None
    module = load_baseline(directory)
    spec = benchmark.spec
    episodes = benchmark.plan("train", 0, BASELINE_EPISODES.get(benchmark_id, 3))
    baseline, random_returns = [], []
    for episode in episodes:
        context = PolicyContext(
            observation_space=spec.observation_space,
            action_space=spec.action_space,
            policy_seed=derive_seed("policy", episode.index),
            metadata=spec.metadata,
            environment_parameters=spec.environment_parameters,
        )
        policy = module.make_policy(context)

        # Observations and actions cross the wire codec, as they would from a policy process.
        def act(observation: Any, policy: Any = policy) -> Any:
            action = policy.act(decode_value(encode_value(observation), writable=False))
            return decode_value(encode_value(action))

        baseline.append(run_episode(benchmark, episode, act))
        rng = random.Random(episode.index)

        def random_act(_observation: Any, rng: random.Random = rng) -> Any:
            return benchmark.sample_action(rng)

        random_returns.append(run_episode(benchmark, episode, random_act))
    assert statistics.fmean(baseline) > statistics.fmean(random_returns), (baseline, random_returns)


def test_lunar_lander_without_box2d(monkeypatch: pytest.MonkeyPatch) -> None:
    box2d = _family("box2d")
    monkeypatch.setitem(sys.modules, "Box2D", None)  # makes ``import Box2D`` fail
    with pytest.raises(BenchmarkError, match="uv sync --extra box2d"):
        box2d.lunar_lander()


def test_missing_gymnasium_dependency_names_the_extra_not_pip() -> None:
    """Gymnasium's advice (`pip install "gymnasium[box2d]"`, which builds box2d-py with swig) is
    replaced by the project's extra, which installs the box2d wheel and pygame. Box2D is made
    unimportable in a real `evopolicy` process, as where the extra is not installed."""
    import subprocess

    script = (
        "import sys; sys.modules['Box2D'] = None\n"
        "from evopolicygym.cli import main\n"
        "sys.argv = ['evopolicy', 'benchmarks', 'show', 'gymnasium:LunarLander-v3']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: gymnasium:LunarLander-v3: missing dependency: Box2D is not installed; "
        "install it with: uv sync --extra box2d"
    ]


def test_an_id_registered_on_import_is_named_with_its_module() -> None:
    """Gymnasium 1.x loads no plugins: MiniGrid's ids exist once ``minigrid`` is imported. The
    error names the id that imports it and the extra; that id then works where it is installed."""
    import subprocess

    evopolicy = [sys.executable, "-c", "from evopolicygym.cli import main; main()"]
    done = subprocess.run(
        [*evopolicy, "benchmarks", "show", "gymnasium:MiniGrid-Empty-5x5-v0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "name it gymnasium:minigrid:MiniGrid-Empty-5x5-v0" in line
    assert line.endswith("(minigrid is installed by: uv sync --extra minigrid)")


def test_an_id_named_with_its_module_works_where_it_is_installed() -> None:
    import subprocess

    require_extra("minigrid", "minigrid")
    evopolicy = [sys.executable, "-c", "from evopolicygym.cli import main; main()"]
    named = subprocess.run(
        [*evopolicy, "benchmarks", "show", "gymnasium:minigrid:MiniGrid-Empty-5x5-v0", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert named.returncode == 0, named.stderr


def test_lunar_lander_says_whether_each_episode_landed_or_crashed() -> None:
    """The box2d family classifies LunarLander's ends: +100 at rest is landed, -100 crashed."""
    from evopolicygym.evaluation import EvaluationConfig, evaluate
    from evopolicygym.program import Program

    benchmark = _lunar_lander()
    baseline = benchmark.baseline_dir()
    assert baseline is not None
    result = evaluate(
        Program.from_directory(baseline),
        benchmark,
        EvaluationConfig(split="validation", seed=3, episodes=3, jobs=1),
    )
    content = result.feedback.content
    assert isinstance(content, dict)
    ends = [e["termination"] for e in content["episodes"]]
    assert set(ends) <= {"landed", "crashed", "truncated"}, ends
    assert sum(content["terminations"].values()) == 3
    # The baseline lands: a crash scores far below the success threshold it reaches.
    for episode, end in zip(result.episodes, ends, strict=True):
        if end == "landed":
            assert episode.total_reward > 0


def test_the_random_program_plays_a_text_action_space() -> None:
    """Commands as TextWorld describes its action space: a random admissible command where
    the observation lists them, else a verb (with an object unless it takes none)."""
    from evopolicygym.benchmark import RANDOM_POLICY_DIR
    from evopolicygym.policy import PolicyContext

    module = load_baseline(RANDOM_POLICY_DIR)
    space = {
        "type": "text",
        "verbs": ["go", "take", "look"],
        "objects": ["north", "coin"],
        "intransitive": ["look"],
        "choices": "admissible_commands",
    }
    context = PolicyContext(observation_space={}, action_space=space, policy_seed=7)
    policy = module.make_policy(context)
    listed = ["open door", "go east"]
    assert {policy.act({"admissible_commands": listed}) for _ in range(40)} == set(listed)
    free = {policy.act({"admissible_commands": []}) for _ in range(200)}
    assert free == {"look", *(f"{v} {o}" for v in ("go", "take") for o in ("north", "coin"))}
