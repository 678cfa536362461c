"""The experiment spec: parsing, profiles, the resolved matrix, its limits and its JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evopolicygym.experiments.spec import (
    MAX_CELLS,
    SpecError,
    load_spec,
    profile_config,
    render_spec_schema,
    resolve,
)
from evopolicygym.run.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "evopolicygym.cli"]

BASE = """
name = "t"
seeds = 2
[[agents]]
provider = "reference"
[[benchmarks]]
id = "cartpole"
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_checked_in_schema_matches_the_code() -> None:
    checked_in = (ROOT / "schemas" / "experiment-spec.json").read_text()
    assert checked_in == render_spec_schema(), (
        "schemas/experiment-spec.json drifted from evopolicygym/experiments/spec.py; "
        "regenerate with 'python -m evopolicygym.experiments.spec > schemas/experiment-spec.json'"
    )
    schema = json.loads(checked_in)
    spec = schema["$defs"]["ExperimentSpec"]
    assert spec["additionalProperties"] is False
    assert set(spec["required"]) == {"name", "agents", "benchmarks"}


def test_the_example_resolves_to_six_cells() -> None:
    path = ROOT / "examples" / "experiments" / "quick.toml"
    created = resolve(load_spec(path), path.parent)
    assert created.experiment_id == "quick"
    assert [c.cell_id for c in created.cells] == [
        f"reference/{b}/seed={s}/agent_seed=0" for b in ("cartpole", "acrobot") for s in range(3)
    ]
    assert created.config["episode_budget"] == 24
    assert created.config["jobs"] == 1  # an experiment's Runs take one evaluation process each
    assert "seed" not in created.config and "benchmark_params" not in created.config


def test_the_matrix_is_the_product_and_its_digest_follows_it(tmp_path: Path) -> None:
    text = BASE.replace("seeds = 2", "seeds = [3, 5]\nagent_seeds = 2") + (
        '[[agents]]\nname = "cmd"\nprovider = "command"\nagent_command = "true"\n'
        '[[benchmarks]]\nid = "gymnasium:CartPole-v1"\nname = "cp"\n'
        "params = { max_episode_steps = 50, sutton_barto_reward = true }\n"
    )
    created = resolve(load_spec(write(tmp_path, text)), tmp_path)
    assert len(created.cells) == 2 * 2 * 2 * 2
    assert created.cells[0].cell_id == "reference/cartpole/seed=3/agent_seed=0"
    assert created.cells[-1].cell_id == "cmd/cp/seed=5/agent_seed=1"
    # Parameters as `evopolicy run --param` passes them: strings, other values as JSON.
    assert created.benchmarks[1].params == {
        "max_episode_steps": "50",
        "sutton_barto_reward": "true",
    }
    assert created.agents[1].options == {"agent_command": "true"}
    again = resolve(load_spec(write(tmp_path, text)), tmp_path)
    assert again.spec_digest == created.spec_digest
    # The profile's label is not part of the matrix: the same RunConfig is the same matrix.
    custom = write(
        tmp_path, (ROOT / "evopolicygym/experiments/profiles/quick.toml").read_text(), "mine.toml"
    )
    relabelled = resolve(
        load_spec(write(tmp_path, text.replace('name = "t"', 'name = "t"\nprofile = "mine.toml"'))),
        tmp_path,
    )
    assert custom.exists() and relabelled.spec_digest == created.spec_digest
    changed = resolve(
        load_spec(write(tmp_path, text.replace("seeds = [3, 5]", "seeds = [3, 6]"))), tmp_path
    )
    assert changed.spec_digest != created.spec_digest


def test_paper_128_is_the_papers_condition(tmp_path: Path) -> None:
    config = RunConfig.from_dict(profile_config("paper-128", tmp_path)).resolved()
    assert config.episode_budget == 128
    assert (config.episode_pool_size, config.max_episodes_per_submission) == (128, 128)
    assert config.validation.episodes_per_candidate == 64
    assert config.assessment.episodes == 256
    quick = RunConfig.from_dict(profile_config("quick", tmp_path)).resolved()
    assert (
        quick.episode_budget,
        quick.validation.episodes_per_candidate,
        quick.assessment.episodes,
    ) == (48, 8, 16)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda t: "colour = 1\n" + t, "contains unknown field `colour`"),
        (
            lambda t: t.replace('provider = "reference"', 'provider = "reference"\nmodle = "x"'),
            "unknown field `modle` - at `agents[0]`",
        ),
        (lambda t: t.replace("seeds = 2", 'seeds = "two"'), "`seeds`"),
        (lambda t: t.replace('name = "t"', 'name = "a/b"'), "name: 'a/b'"),
        (lambda t: t.replace('name = "t"\n', ""), "missing required field `name`"),
        (
            lambda t: 'profile = "nope"\n' + t,
            "profile: 'nope' is neither quick nor paper-128 nor a file",
        ),
        (lambda t: t + "[run]\nseed = 3\n", "[run]: seed is set per cell"),
        (lambda t: t + "[run]\nepisode_budget = 0\n", "episode_budget must be between 1"),
        (lambda t: t + "[run]\nbudget = 3\n", "unknown field `budget`"),
        (lambda t: t.replace("seeds = 2", "seeds = [1, 1]"), "seeds: a seed is given twice"),
        (
            lambda t: t + '[[agents]]\nprovider = "reference"\n',
            "agents: two share the label 'reference'",
        ),
        (
            lambda t: t.replace("seeds = 2", f"seeds = {MAX_CELLS}\nagent_seeds = 2"),
            "more than the 10,000",
        ),
        (lambda t: t + "[[", "not TOML"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(tmp_path: Path, edit: object, says: str) -> None:
    text = edit(BASE)  # type: ignore[operator]
    with pytest.raises(SpecError) as caught:
        resolve(load_spec(write(tmp_path, text)), tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert says in message


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda t: t.replace('provider = "reference"', 'provider = "nobody"'),
            "agents nobody: unknown agent 'nobody'",
        ),
        (
            lambda t: t.replace('id = "cartpole"', 'id = "no-such-bench"'),
            "benchmarks no-such-bench:",
        ),
        (
            lambda t: t.replace('provider = "reference"', 'provider = "command"'),
            "needs --agent-command",
        ),
        (
            lambda t: t.replace(
                'provider = "reference"', 'provider = "reference"\nskills = ["missing"]'
            ),
            "is not a directory",
        ),
    ],
)
def test_run_checks_agents_and_benchmarks_before_recording(
    tmp_path: Path, edit: object, says: str
) -> None:
    spec = write(tmp_path, edit(BASE))  # type: ignore[operator]
    store = tmp_path / "store"
    done = subprocess.run(
        [*CLI, "experiment", "run", str(spec), "--store", str(store), "--allow-uncontained-agent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert not store.exists()


@pytest.mark.parametrize(
    "path", sorted((ROOT / "examples" / "experiments").glob("*.toml")), ids=lambda p: p.name
)
def test_every_example_resolves(path: Path) -> None:
    created = resolve(load_spec(path), path.parent)
    assert created.experiment_id and created.cells
    assert len(created.cells) == len(created.agents) * len(created.benchmarks) * len(
        {c.seed for c in created.cells}
    ) * len({c.agent_seed for c in created.cells})
