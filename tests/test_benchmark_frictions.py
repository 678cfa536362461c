"""A newcomer's first steps with Benchmarks (issue 27): every catalog task listed with the
extra installing it, and that one line when an uninstalled one is asked for; "did you mean"
for a near id; the conformance check's synthetic score labelled as such; an Episode cut at
the step limit called ``truncated``, also in Runs recorded when it was ``timed_out``.

Every family is installed where these tests run in CI, so a family is hidden the way a
fresh clone synced without its extra lacks it: in a fresh interpreter whose
``importlib.metadata`` does not find the family's distribution (no entry points, no
metadata) and where its module does not import.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import msgspec

from evopolicygym.benchmark import CORE16, TASKS, family_installed, family_of_distribution
from evopolicygym.evaluation import EvaluationConfig, evaluate
from evopolicygym.program import Program
from evopolicygym.records.events import NewEvent, current_terminations, decode_event
from evopolicygym.records.location import open_store
from evopolicygym.registry import GROUP, load_benchmark
from tests.support.cli import invoke
from tests.support.requires import require_extra

# The families a default install lacks: everything but classic (which comes with evopolicygym).
OPTIONAL = ("box2d", "cards", "driving", "minigrid", "mujoco", "robotics")

_WITHOUT = """
import runpy, sys
from importlib import metadata
hidden = set(sys.argv[1].split(","))
modules_only = sys.argv[2] == "modules"
discover = metadata.Distribution.discover
def visible(**kwargs):
    for found in discover(**kwargs):
        name = (found.metadata["Name"] or "").replace("_", "-").lower()
        if name not in hidden:
            yield found
if not modules_only:
    metadata.Distribution.discover = staticmethod(visible)
for name in hidden:
    sys.modules[name.replace("-", "_")] = None
sys.argv = ["evopolicy", *sys.argv[3:]]
runpy.run_module("evopolicygym.cli", run_name="__main__", alter_sys=True)
"""


def without(
    families: tuple[str, ...], *args: str, modules_only: bool = False
) -> subprocess.CompletedProcess[str]:
    """``evopolicy ARGS`` in a fresh interpreter where ``families`` are not installed (or,
    ``modules_only``, installed but not importable)."""
    hidden = ",".join(f"evopolicygym-{family}" for family in families)
    mode = "modules" if modules_only else "dists"
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, hidden, mode, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )


def only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


POLICY = """
def make_policy(context):
    return Balance()


class Balance:
    # Holds CartPole's pole up for the whole step limit (500 steps).
    def act(self, observation):
        x, x_dot, theta, theta_dot = observation
        return 1 if theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0 else 0
"""


def balancing_program(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy.py").write_text(POLICY)
    return root


# --------------------------------------------------------------------------- the catalog


def test_the_catalog_names_every_registered_task_of_a_family() -> None:
    """Each id a family registers is in TASKS under that family, so `benchmarks list` can
    name it where the family is not installed; Core16 is drawn from the same table."""
    for ep in entry_points(group=GROUP):
        family = family_of_distribution(ep.dist.name) if ep.dist is not None else None
        if family is not None:
            assert ep.name in TASKS, f"{ep.name} ({family}) is missing from catalog.TASKS"
            assert TASKS[ep.name].family == family
    for family in (*OPTIONAL, "classic"):
        ids = {t.id for t in TASKS.values() if t.family == family}
        assert ids, family
        if family_installed(family):
            registered = {ep.name for ep in entry_points(group=GROUP)}
            assert ids <= registered, (family, ids - registered)
    assert {"leduc", "holdem_limit"} <= {t.id for t in TASKS.values() if t.family == "cards"}
    assert {"lunar-lander", "bipedal", "racing"} == {
        t.id for t in TASKS.values() if t.family == "box2d"
    }
    assert all(
        TASKS[m.id].environment == m.environment and TASKS[m.id].family == m.family for m in CORE16
    )
    assert TASKS["continuouscar"].alias_of == load_benchmark("continuouscar").spec.id


def test_list_names_uninstalled_tasks_with_the_command_installing_them() -> None:
    done = without(OPTIONAL, "benchmarks", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["benchmark_id"]: row for row in json.loads(done.stdout)}
    assert set(TASKS) <= set(rows)
    for name in ("leduc", "holdem_limit", "lunar-lander", "bipedal", "racing", "ant5", "parking"):
        family = TASKS[name].family
        assert rows[name]["installed"] is False, name
        assert rows[name]["install"] == f"uv sync --extra {family}"
        assert rows[name]["family"] == family
        assert rows[name]["description"] == TASKS[name].description
    assert rows["lunar-lander"]["environment"] == "LunarLander-v3"
    assert rows["bipedal"]["suites"] == ["core16"] and rows["leduc"]["suites"] == []
    for name in ("cartpole", "acrobot", "continuouscar"):
        assert rows[name]["installed"] is True and rows[name]["install"] is None
    table = without(OPTIONAL, "benchmarks", "list", "--family", "box2d")
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line.strip()}
    for name in ("lunar-lander", "bipedal", "racing"):
        assert "no: uv sync --extra box2d" in lines[name], table.stdout
    assert "cartpole" not in lines


def test_asking_for_an_uninstalled_task_says_its_extra_in_one_line(tmp_path: Path) -> None:
    program = balancing_program(tmp_path / "program")
    store = tmp_path / "store"
    expected = (
        "error: benchmark 'bipedal' needs the box2d family, which is not installed: "
        "uv sync --extra box2d"
    )
    commands = [
        ("evaluate", str(program), "--benchmark", "bipedal"),
        ("run", "--benchmark", "bipedal", "--agent", "reference", "--budget", "2",
         "--store", str(store), "--allow-uncontained-agent"),
        ("benchmarks", "show", "bipedal"),
        ("benchmarks", "check", "bipedal"),
    ]  # fmt: skip
    for args in commands:
        done = without(("box2d",), *args)
        assert done.returncode == 1, (args, done.stderr)
        assert only_line(done.stderr) == expected, args
        assert done.stdout == ""
    assert not store.exists()  # refused before anything was recorded
    # A near miss of an uninstalled id is suggested too: the catalog's ids count.
    near = without(("box2d",), "benchmarks", "show", "bipedl")
    assert near.returncode == 1
    assert only_line(near.stderr) == "error: unknown benchmark 'bipedl'; did you mean 'bipedal'?"


def test_an_installed_family_that_does_not_import_says_how_to_reinstall_it() -> None:
    require_extra("box2d")  # installed, then made to fail its import
    done = without(("box2d",), "benchmarks", "show", "lunar-lander", modules_only=True)
    assert done.returncode == 1
    line = only_line(done.stderr)
    assert line.startswith("error: benchmark 'lunar-lander' cannot be imported (")
    assert line.endswith("); reinstall the box2d family: uv sync --extra box2d")


# --------------------------------------------------------------------------- did you mean


def test_a_near_id_gets_a_did_you_mean(tmp_path: Path) -> None:
    program = balancing_program(tmp_path / "program")
    result = invoke("evaluate", str(program), "--benchmark", "cartpol")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "error: unknown benchmark 'cartpol'; did you mean 'cartpole'?\n"
    typo = invoke("benchmarks", "show", "gymnasum:CartPole-v1")
    assert typo.exit_code == 1
    assert (
        typo.stderr == "error: unknown benchmark 'gymnasum:CartPole-v1'; "
        "did you mean 'gymnasium:CartPole-v1'?\n"
    )
    far = invoke("benchmarks", "show", "zzzz")
    assert far.exit_code == 1
    line = only_line(far.stderr)
    assert line.startswith("error: unknown benchmark 'zzzz' (known: acrobot, ")
    assert "lunar-lander" in line and "did you mean" not in line


# -------------------------------------------------------------------------- check's synthetic score


def test_check_labels_its_synthetic_score() -> None:
    result = invoke("benchmarks", "check", "acrobot", "--json")
    assert result.exit_code == 0, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    # Returns 0 and 1 and a failed Episode at acrobot's failure score -500: not a measurement.
    assert checks["scoring"] == {
        "name": "scoring",
        "ok": True,
        "detail": "on synthetic records, not a measurement: -166.333",
    }
    human = invoke("benchmarks", "check", "acrobot")
    assert human.exit_code == 0
    assert "on synthetic records" in human.stdout and "score -166.333" not in human.stdout


# --------------------------------------------------------------------------- truncated


def test_a_cartpole_episode_at_the_step_limit_is_truncated(tmp_path: Path) -> None:
    program = Program.from_directory(balancing_program(tmp_path / "program"))
    result = evaluate(
        program,
        load_benchmark("cartpole"),
        EvaluationConfig(split="assessment", episodes=2, seed=0, jobs=1),
    )
    content = result.feedback.content
    assert [e.steps for e in result.episodes] == [500, 500]
    assert [e["termination"] for e in content["episodes"]] == ["truncated", "truncated"]
    assert content["terminations"] == {"truncated": 2}
    assert b"timed_out" not in msgspec.json.encode(content)


def test_old_words_are_mapped_once() -> None:
    old = {
        "episodes": [
            {"termination": "timed_out", "truncated": True},
            {"termination": "policy_timeout"},
        ],
        "terminations": {"policy_timeout": 1, "timed_out": 1},
        "mean_return": 3.0,
    }
    assert current_terminations(old) == {
        "episodes": [
            {"termination": "truncated", "truncated": True},
            {"termination": "policy_timeout"},
        ],
        "terminations": {"policy_timeout": 1, "truncated": 1},
        "mean_return": 3.0,
    }
    assert old["terminations"] == {
        "policy_timeout": 1,
        "timed_out": 1,
    }  # the argument is left alone


_CONTENT_EVENTS = ("SubmissionPublished", "AssessmentCompleted", "CandidateAssessed")


def _as_recorded_before(payload: bytes) -> bytes:
    """A v2 payload as the code before the rename wrote it (v1): ``timed_out`` for ``truncated``."""
    data = msgspec.json.decode(payload)
    content = data["content"]
    for episode in content.get("episodes", []):
        if episode.get("termination") == "truncated":
            episode["termination"] = "timed_out"
    counts = content.get("terminations", {})
    content["terminations"] = {
        ("timed_out" if k == "truncated" else k): v for k, v in counts.items()
    }
    return msgspec.json.encode(data, order="sorted")


def test_a_run_recorded_with_timed_out_reads_as_truncated_and_keeps_its_bytes(
    tmp_path: Path,
) -> None:
    program = balancing_program(tmp_path / "program")
    new_store, old_store = tmp_path / "new", tmp_path / "old"
    done = invoke("run", "--benchmark", "cartpole", "--agent", "reference", "--budget", "2",
                  "--program", str(program), "--validation-episodes", "1",
                  "--assessment-episodes", "1", "--jobs", "1", "--store", str(new_store),
                  "--allow-uncontained-agent", "--json")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    stream = f"run-{run_id}"
    # The same Run in a store as the code before the rename would have written it.
    with open_store(new_store) as store:
        envelopes = list(store.events.read_stream(stream, 0))
    written: dict[str, bytes] = {}
    events = []
    for envelope in envelopes:
        if envelope.type in _CONTENT_EVENTS:
            payload = _as_recorded_before(envelope.payload)
            written[envelope.event_id] = payload
            events.append(NewEvent(envelope.event_id, envelope.type, 1, payload))
        else:
            events.append(
                NewEvent(
                    envelope.event_id, envelope.type, envelope.schema_version, envelope.payload
                )
            )
    assert any(b'"timed_out"' in payload for payload in written.values())
    with open_store(old_store, create=True) as store:
        shutil.copytree(new_store / "blobs", old_store / "blobs", dirs_exist_ok=True)
        store.events.append(stream, events, 0)
    with open_store(old_store) as store:
        old = [e for e in store.events.read_stream(stream, 0) if e.type in _CONTENT_EVENTS]
    assert {e.event_id: e.payload for e in old} == written  # stored as written
    assert all(e.schema_version == 1 for e in old)
    truncated = 0
    for envelope in old:
        content = envelope.event().content  # type: ignore[attr-defined]
        assert b"timed_out" not in msgspec.json.encode(content)
        truncated += content.get("terminations", {}).get("truncated", 0)
        assert decode_event(envelope.type, 1, envelope.payload) == envelope.event()
    assert truncated >= 1
    verified = invoke("record", "verify", "--store", str(old_store))
    assert verified.exit_code == 0, verified.output
    replayed = invoke("record", "replay", run_id, "--store", str(old_store))
    assert replayed.exit_code == 0, replayed.output
