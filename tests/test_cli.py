"""The ``evopolicy`` command line, on the real registry, Benchmarks and evaluation engine."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.cli.evaluate import EXIT_ALL_FAILED
from evopolicygym.evaluation import plan_episodes
from evopolicygym.registry import load_benchmark
from tests.support.policies import CRASHING_POLICY

SWING_POLICY = """
class Swing:
    def act(self, observation):
        return 1 if float(observation[3]) > 0 else 0


def make_policy(context):
    return Swing()
"""


def invoke(*args: str) -> Result:
    # click < 8.2 mixes stderr into stdout unless told not to; 8.2+ always keeps them apart.
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        runner = CliRunner(mix_stderr=False)
    else:
        runner = CliRunner()
    result = runner.invoke(main, list(args), prog_name="evopolicy")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def assert_one_line_error(result: Result, exit_code: int | None = None) -> str:
    assert result.exit_code != 0
    if exit_code is not None:
        assert result.exit_code == exit_code
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def ok_json(result: Result) -> object:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def swing(tmp_path: Path) -> Path:
    program = tmp_path / "swing"
    program.mkdir()
    (program / "policy.py").write_text(SWING_POLICY)
    return program


def test_version_and_help() -> None:
    version = invoke("--version")
    assert version.exit_code == 0 and "0.1.0" in version.stdout
    helped = invoke("--help")
    assert helped.exit_code == 0
    assert "benchmarks" in helped.stdout and "evaluate" in helped.stdout


def test_benchmarks_list() -> None:
    result = invoke("benchmarks", "list")
    assert result.exit_code == 0, result.output
    # Every family's tasks are listed, installed or not (lunar-lander with box2d, leduc and
    # holdem_limit with cards), each saying whether it is installed and how to install it.
    names = {"cartpole", "frozen-lake", "acrobot", "mountain-car-continuous"}
    names |= {"lunar-lander", "bipedal", "leduc", "holdem_limit"}
    for name in [*names, "gymnasium", "gymnasium:<EnvId>"]:
        assert name in result.stdout
    rows = ok_json(invoke("benchmarks", "list", "--json"))
    assert isinstance(rows, list)
    by_name = {row["benchmark_id"]: row for row in rows}
    assert names | {"gymnasium"} <= set(by_name)
    assert all(row["description"] for row in rows)
    assert "Balance a pole" in by_name["cartpole"]["description"]
    box2d = importlib.util.find_spec("evopolicygym_box2d") is not None
    if not box2d and os.environ.get("EVOPOLICY_REQUIRE_EXTRAS") == "1":
        pytest.fail("the box2d family is missing but EVOPOLICY_REQUIRE_EXTRAS=1")
    assert by_name["lunar-lander"]["installed"] is box2d
    assert by_name["lunar-lander"]["install"] == (None if box2d else "uv sync --extra box2d")
    assert by_name["cartpole"]["installed"] is True and by_name["cartpole"]["install"] is None


def test_show_cartpole_json() -> None:
    spec = ok_json(invoke("benchmarks", "show", "cartpole", "--json"))
    assert isinstance(spec, dict)
    assert spec["benchmark_id"] == "cartpole" and "id" not in spec
    assert spec["score_direction"] == "maximize"
    assert spec["environment_digest"] == load_benchmark("cartpole").spec.environment_digest
    assert spec["action_space"] == {"type": "discrete", "n": 2, "start": 0}
    assert spec["splits"] == ["train", "validation", "assessment"]
    assert Path(spec["baseline"], "policy.py").is_file()


def test_show_frozen_lake_params() -> None:
    spec = ok_json(invoke("benchmarks", "show", "frozen-lake", "--param", "map=8x8", "--json"))
    assert isinstance(spec, dict)
    assert spec["environment_parameters"]["map_name"] == "8x8"
    assert len(spec["metadata"]["map"]) == 8
    assert spec["observation_space"]["n"] == 64
    human = invoke("benchmarks", "show", "frozen-lake", "--param", "map=8x8")
    assert human.exit_code == 0 and "FFFHFFFG" in human.stdout
    line = assert_one_line_error(invoke("benchmarks", "show", "frozen-lake", "--param", "map=9x9"))
    assert "9x9" in line


def test_check_cartpole() -> None:
    result = invoke("benchmarks", "check", "cartpole")
    assert result.exit_code == 0, result.output
    assert "replay determinism" in result.stdout and "FAIL" not in result.stdout
    report = ok_json(invoke("benchmarks", "check", "cartpole", "--json"))
    assert isinstance(report, dict) and report["ok"] is True


def test_evaluate_baseline_json_hides_seeds() -> None:
    result = invoke(
        "evaluate",
        "baseline",
        "--benchmark",
        "cartpole",
        "--episodes",
        "2",
        "--jobs",
        "1",
        "--json",
    )
    data = ok_json(result)
    assert isinstance(data, dict)
    assert data["benchmark_id"] == "cartpole"
    assert data["feedback"]["score"] > 0
    assert [e["index"] for e in data["episodes"]] == [0, 1]
    assert "records" not in data
    for artifact in data["feedback"]["artifacts"]:
        assert set(artifact) == {"name", "media_type", "retention", "size"}
    benchmark = load_benchmark("cartpole")
    seeds = [spec.seed for spec in benchmark.plan("train", 0, 2)]
    seeds += [p.policy_seed for p in plan_episodes(benchmark, "train", 0, 2)]
    for seed in seeds:
        assert str(seed) not in result.output


def test_evaluate_directory_human_output(swing: Path) -> None:
    result = invoke(
        "evaluate", str(swing), "--benchmark", "cartpole", "--episodes", "2", "--jobs", "1"
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    for text in ("cartpole", "sha256:", "maximize", "containment", "episode"):
        assert text in result.stdout


def test_evaluate_failing_episodes_exit_with_their_own_status(tmp_path: Path) -> None:
    (tmp_path / "policy.py").write_text(CRASHING_POLICY)
    args = ("evaluate", str(tmp_path), "--benchmark", "cartpole", "--episodes", "2", "--jobs", "1")
    as_json = invoke(*args, "--json")
    assert as_json.exit_code == EXIT_ALL_FAILED, as_json.output  # every Episode failed
    data = json.loads(as_json.stdout)
    assert isinstance(data, dict)
    assert data["failures"] == 2
    assert {e["status"] for e in data["episodes"]} == {"exception"}
    human = invoke(*args)
    assert human.exit_code == EXIT_ALL_FAILED, human.output
    assert "exception" in human.stdout
    assert "RuntimeError: boom boom" in human.stdout and "boom " * 20 not in human.stdout


def test_evaluate_gymnasium_family(swing: Path) -> None:
    result = invoke(
        "evaluate",
        str(swing),
        "--benchmark",
        "gymnasium:CartPole-v1",
        "--episodes",
        "2",
        "--jobs",
        "2",
        "--param",
        "max_episode_steps=50",
        "--json",
    )
    data = ok_json(result)
    assert isinstance(data, dict)
    assert data["benchmark_id"] == "gymnasium:CartPole-v1"
    assert all(0 < e["steps"] <= 50 for e in data["episodes"])


@pytest.mark.parametrize(
    ("args", "exit_code", "expected"),
    [
        (["evaluate", "{missing}", "--benchmark", "cartpole"], 1, "{missing}: cannot read"),
        (
            ["evaluate", "{empty}", "--benchmark", "cartpole"],
            1,
            "{empty}: program has no policy.py",
        ),
        (["evaluate", "{linked}", "--benchmark", "cartpole"], 1, "symlinks are not allowed"),
        (["evaluate", "{swing}", "--benchmark", "nope"], 1, "unknown benchmark 'nope'"),
        (["evaluate", "{swing}", "--benchmark", "cartpole", "--split", "nope"], 1, "unknown split"),
        (["evaluate", "{swing}", "--benchmark", "cartpole", "--param", "oops"], 2, "key=value"),
        (
            ["evaluate", "{swing}", "--benchmark", "cartpole", "--param", "x=1"],
            1,
            "invalid parameters",
        ),
        (["evaluate", "{swing}", "--benchmark", "cartpole", "--jobs", "0"], 2, "--jobs"),
        (["evaluate", "{swing}"], 2, "--benchmark"),
        (
            ["evaluate", "baseline", "--benchmark", "gymnasium:CartPole-v1"],
            1,
            "no packaged baseline",
        ),
        (["evaluate", "baseline", "--benchmark", "gymnasium"], 1, "use gymnasium:<id>"),
        (["benchmarks", "show", "gymnasium:NoSuchEnv-v0"], 1, "NoSuchEnv-v0"),
        (["benchmarks", "check", "nope"], 1, "unknown benchmark"),
        # an id known nowhere: the known ids, and where to see which are installed
        (["benchmarks", "show", "nope"], 1, "'evopolicy benchmarks list' says which are installed"),
        (["no-such-command"], 2, "no-such-command"),
    ],
)
def test_user_errors_are_one_line(
    tmp_path: Path, swing: Path, args: list[str], exit_code: int, expected: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "policy.py").symlink_to(swing / "policy.py")
    paths = {
        "missing": tmp_path / "missing",
        "empty": tmp_path / "empty",
        "linked": tmp_path / "linked",
        "swing": swing,
    }
    line = assert_one_line_error(invoke(*(a.format(**paths) for a in args)), exit_code)
    assert expected.format(**paths) in line


def test_console_script_and_module(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "evopolicy"
    env = {**os.environ, "COLUMNS": "120"}
    done = subprocess.run(
        [
            str(script),
            "evaluate",
            "baseline",
            "--benchmark",
            "cartpole",
            "--episodes",
            "1",
            "--jobs",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["feedback"]["score"] > 0
    failed = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "evaluate",
            str(tmp_path),
            "--benchmark",
            "cartpole",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert failed.stderr == f"error: {tmp_path}: program has no policy.py\n"
