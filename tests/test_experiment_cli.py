"""``evopolicy experiment``: its commands' help, bad input (one line, non-zero, nothing
recorded) and listing, through the real CLI in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evopolicygym.records.location import open_store

CLI = [sys.executable, "-m", "evopolicygym.cli"]
SPEC = """
name = "t"
[[agents]]
provider = "reference"
[[benchmarks]]
id = "cartpole"
"""


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_help_lists_the_commands_and_documents_exit_statuses() -> None:
    listed = _cli("experiment", "--help")
    assert listed.returncode == 0
    for name in ("run", "status", "list"):
        assert f"  {name} " in listed.stdout
    helped = _cli("experiment", "run", "--help")
    assert (
        "Exit status:" in helped.stdout and "130" in helped.stdout and "--retries" in helped.stdout
    )


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe")
    (tmp_path / "dir").mkdir()
    with open_store(tmp_path / "store", create=True):
        pass
    return {
        k: str(tmp_path / v)
        for k, v in {
            "spec": "spec.toml",
            "bad": "bad.toml",
            "dir": "dir",
            "store": "store",
            "missing": "missing",
            "fresh": "fresh",
        }.items()
    }


ROWS = [
    (("run", "{missing}.toml", "--store", "{fresh}"), "no such file"),
    (("run", "{bad}", "--store", "{fresh}"), "not toml"),
    (("run", "{dir}", "--store", "{fresh}"), "is a directory"),
    (("run", "{spec}", "--retries", "-1", "--store", "{fresh}"), "--retries"),
    (("run", "{spec}", "--max-runs", "0", "--store", "{fresh}"), "--max-runs"),
    (("run", "{spec}", "--store", "{spec}"), "not a directory"),
    (("status", "nope", "--store", "{store}"), "no experiment 'nope'"),
    (("status", "nope", "--store", "{missing}"), "no store at"),
    (("list", "--store", "{missing}"), "no store at"),
]


@pytest.mark.parametrize(("args", "says"), ROWS, ids=[" ".join(a[:2]) for a, _ in ROWS])
def test_bad_input_is_one_line_and_records_nothing(
    paths: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    done = _cli("experiment", *(a.format(**paths) for a in args))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert says in lines[0].lower()
    assert "Traceback" not in done.stdout + done.stderr
    assert not Path(paths["fresh"]).exists()


def test_list_of_an_empty_store(paths: dict[str, str]) -> None:
    listed = _cli("experiment", "list", "--store", paths["store"], "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    told = _cli("experiment", "list", "--store", paths["store"])
    assert told.returncode == 0 and "no experiments" in told.stdout  # the (empty) result


def test_summary_is_a_subcommand_once_its_module_exists() -> None:
    from evopolicygym.cli.experiment import experiment

    try:
        import evopolicygym.cli.experiment_summary  # noqa: F401
    except ModuleNotFoundError:
        present = False
    else:
        present = True
    import click

    ctx = click.Context(experiment)
    assert ("summary" in experiment.list_commands(ctx)) is present
    assert (experiment.get_command(ctx, "summary") is not None) is present


def test_the_same_name_with_another_matrix_is_refused(
    paths: dict[str, str], tmp_path: Path
) -> None:
    from evopolicygym.experiments.spec import load_spec, resolve
    from evopolicygym.records.events import new_event
    from evopolicygym.records.experiments import experiment_stream_id

    created = resolve(load_spec(paths["spec"]), tmp_path)
    with open_store(paths["store"]) as store:
        store.events.append(experiment_stream_id("t"), [new_event(created, "t/created")], 0)
    changed = tmp_path / "changed.toml"
    changed.write_text(SPEC.replace('name = "t"', 'name = "t"\nseeds = 2'))
    done = _cli(
        "experiment", "run", str(changed), "--store", paths["store"], "--allow-uncontained-agent"
    )
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: experiment 't' exists in this store with another matrix (1 cell, profile quick)"
    )
    assert len(done.stderr.strip().splitlines()) == 1
    with open_store(paths["store"]) as store:
        assert [i.stream_id for i in store.events.streams()] == ["experiment-t"]  # no Run was made


def test_paths_that_are_not_utf8_are_refused_before_a_store_is_made(
    paths: dict[str, str], tmp_path: Path
) -> None:
    for args in ([paths["spec"], "--store", b"\xff\xfe"], [b"\xff\xfe", "--store", paths["fresh"]]):
        done = subprocess.run(
            [*CLI, "experiment", "run", *args], capture_output=True, timeout=120, cwd=tmp_path
        )
        lines = done.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        assert (
            done.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("error: not valid UTF-8")
        ), lines
    assert not Path(paths["fresh"]).exists() and not (tmp_path / "\udcff\udcfe").exists()


def test_one_runner_per_experiment(paths: dict[str, str]) -> None:
    """While a process runs an experiment (holds its lock), another is refused in one line."""
    import fcntl
    import os

    lock = Path(paths["store"]) / "experiments" / "t.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        done = _cli(
            "experiment",
            "run",
            paths["spec"],
            "--store",
            paths["store"],
            "--allow-uncontained-agent",
        )
    finally:
        os.close(fd)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: experiment t is being run by another process"
    with open_store(paths["store"]) as store:
        assert [i.stream_id for i in store.events.streams("run-")] == []
