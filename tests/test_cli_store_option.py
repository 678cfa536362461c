"""One way to name the store, and hints that work when pasted.

``--store`` is accepted at the ``record`` group, after every subcommand that opens a store, and
after ``run``/``resume``/``query``/``export``/``quickstart``; ``$EVOPOLICY_STORE`` stands in for
it everywhere. Every command the CLI prints for the user to run carries the ``--store`` that
was given and the launcher that was used: here the hints of a real quickstart are run, as
printed, from another directory.

All through the real CLI in subprocesses, on one store recorded by a real ``quickstart``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from evopolicygym.cli.record import record
from evopolicygym.records.location import STORE_ENV

CLI = [sys.executable, "-m", "evopolicygym.cli"]
BIN = Path(sys.executable).parent  # where the `evopolicy` console script is
UV_RUN_ENV = "UV_RUN_RECURSION_DEPTH"  # what `uv run` sets in the environment of its children
# A Run a pasted `run` hint starts is made small (click takes the last of a repeated option).
SMALL = shlex.split("--budget 4 --validation-episodes 2 --max-candidates 1 --assessment-episodes 2")


def _env(**extra: str) -> dict[str, str]:
    """The environment of a user who typed `evopolicy` (not `uv run evopolicy`), no store set."""
    env = {k: v for k, v in os.environ.items() if k not in (STORE_ENV, UV_RUN_ENV)}
    env.update(NO_COLOR="1", COLUMNS="80", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*CLI, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@dataclass(frozen=True)
class Recorded:
    home: Path  # where quickstart ran
    store: Path  # its --store (a path with a space, which hints must quote)
    run_id: str
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    home = tmp_path_factory.mktemp("quickstart")
    store = home / "my store"
    result = _cli(["quickstart", "--budget", "4", "--store", str(store)], home)
    assert result.returncode == 0, result.stderr
    match = re.search(r"^run (\S+): ", result.stderr, re.MULTILINE)
    assert match is not None, result.stderr
    return Recorded(home, store, match.group(1), result.stdout, result.stderr)


# --------------------------------------------------------------------------- --store anywhere


def test_every_record_subcommand_that_opens_a_store_takes_store() -> None:
    for name, command in record.commands.items():
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert ("--store" in options) == (name != "schema"), name


def _cases(run_id: str, out: Path) -> dict[str, tuple[list[str], Callable[[str], object]]]:
    """A `record` subcommand: its words (the store left out) and a check of what it prints."""

    def rows(stdout: str) -> list[str]:
        return [row["run_id"] for row in json.loads(stdout)]

    return {
        "create": (["create"], lambda out_: re.search(r"store at .* already exists", out_)),
        "list": (["list", "--json"], lambda out_: run_id in rows(out_)),
        "show": (["show", run_id, "--json"], lambda out_: json.loads(out_)["run_id"] == run_id),
        "events": (["events", run_id, "--json"], lambda out_: len(out_.splitlines()) > 5),
        "head": (["head"], lambda out_: re.fullmatch(r"\d+:[0-9a-f]{64}\n", out_)),
        "verify": (["verify", run_id], lambda out_: out_.startswith("ok")),
        "replay": (["replay", run_id], lambda out_: run_id in out_ and "ok: " in out_),
        "checkout": (
            ["checkout", run_id, "final", str(out)],
            lambda _: (out / "policy.py").is_file(),
        ),
        "logs": (["logs", run_id], lambda out_: out_.startswith("==> stdout (attempt 1")),
    }


# After the subcommand (new) for every one; at the group (as tests/test_record_cli.py does for
# the rest) and from the environment for those from other modules and the commonest, since all
# of them find the store by one function (stores.store_root).
@pytest.mark.parametrize(
    ("where", "names"),
    [
        (
            "subcommand",
            ["create", "list", "show", "events", "head", "verify", "replay", "checkout", "logs"],
        ),
        ("group", ["list", "show", "replay", "checkout"]),
        ("env", ["list", "show", "replay", "checkout"]),
    ],
)
def test_record_subcommands_take_the_store_at_the_group_after_the_subcommand_or_from_the_env(
    recorded: Recorded, tmp_path: Path, where: str, names: list[str]
) -> None:
    store = tmp_path / "store"  # a copy per way of naming it, so the three may run at once
    shutil.copytree(recorded.store, store)
    elsewhere = tmp_path / "elsewhere"  # no ./evopolicy-store here: only the named store can answer
    elsewhere.mkdir()

    def one(name: str, words: list[str]) -> tuple[str, subprocess.CompletedProcess[str]]:
        if where == "subcommand":
            return name, _cli(["record", *words, "--store", str(store)], elsewhere)
        if where == "group":
            return name, _cli(["record", "--store", str(store), *words], elsewhere)
        return name, _cli(["record", *words], elsewhere, **{STORE_ENV: str(store)})

    cases = {
        name: case
        for name, case in _cases(recorded.run_id, tmp_path / "checkout").items()
        if name in names
    }
    # Read-only commands on one store, at once (each is mostly interpreter start-up).
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(pool.map(lambda item: one(item[0], item[1][0]), cases.items()))
    for name, (_words, check) in cases.items():
        assert results[name].returncode == 0, (name, results[name].stderr)
        assert check(results[name].stdout), (name, results[name].stdout)


def test_a_store_after_the_subcommand_wins_over_the_groups(
    recorded: Recorded, tmp_path: Path
) -> None:
    words = ["record", "--store", str(tmp_path / "other"), "list", "--store", str(recorded.store)]
    result = _cli([*words, "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert recorded.run_id in [row["run_id"] for row in json.loads(result.stdout)]
    # and hints name that one
    missing = _cli(
        ["record", "--store", str(recorded.store), "show", "nope", "--store", "elsewhere"], tmp_path
    )
    assert missing.returncode == 1
    assert (
        missing.stderr == "error: no store at elsewhere: create one with "
        "`evopolicy record create --store elsewhere` "
        "(or point --store or EVOPOLICY_STORE at an existing store)\n"
    )


def test_query_and_resume_take_the_store_from_the_env(recorded: Recorded, tmp_path: Path) -> None:
    # (export and run take --store after the command as they did: the hints below run them)
    store = tmp_path / "store"
    shutil.copytree(recorded.store, store)
    env = {STORE_ENV: str(store)}
    queried = _cli(["query", "SELECT run_id FROM runs", "--json"], tmp_path, **env)
    assert queried.returncode == 0, queried.stderr
    assert {"run_id": recorded.run_id} in json.loads(queried.stdout)
    resumed = _cli(["resume", recorded.run_id, "--json"], tmp_path, **env)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        json.loads(resumed.stdout)["status"] == "finished" and "nothing to resume" in resumed.stderr
    )


# --------------------------------------------------------------------------- hints


def _hints(recorded: Recorded) -> list[str]:
    """The commands quickstart prints: "replay it: ..." (under the Run's outcome) and each one
    under "What next:", all on stdout."""
    stdout = recorded.stdout
    replay = [
        line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("replay it: ")
    ]
    after = stdout.split("\nWhat next:\n", 1)[1].splitlines()
    return replay + [line.strip() for line in after if line.startswith("    ")]


@pytest.mark.slow
def test_the_hints_quickstart_prints_work_when_pasted_elsewhere(
    recorded: Recorded, tmp_path: Path
) -> None:
    hints = _hints(recorded)
    quoted = shlex.quote(str(recorded.store))
    assert len(hints) == 7 and quoted.startswith("'"), hints  # the store's path has a space
    for hint in hints:
        words = shlex.split(hint)
        assert words[0] == "evopolicy", hint  # the launcher used (not `uv run`, see below)
        if words[1:3] != ["run", "--help"]:
            assert hint.endswith(f" --store {quoted}"), hint  # the store given, quoted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for hint in dict.fromkeys(hints):  # ("replay it" is also the first of "What next")
        words = shlex.split(hint)
        if words[1] == "run" and "--help" not in words:
            words += SMALL  # the hint's Benchmark and store, on a small budget
        result = subprocess.run(words, cwd=elsewhere, env=_env(), capture_output=True, text=True)
        assert result.returncode == 0, (hint, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    assert (elsewhere / "best" / "policy.py").is_file() and (elsewhere / "dataset").is_dir()
    assert not (elsewhere / "evopolicy-store").exists()  # every hint went to the store given


def test_a_hint_names_uv_run_under_uv_run_and_no_store_from_the_env(
    recorded: Recorded, tmp_path: Path
) -> None:
    missing = shlex.quote(str(tmp_path / "no store"))
    by_uv = _cli(
        ["record", "list", "--store", str(tmp_path / "no store")], tmp_path, **{UV_RUN_ENV: "1"}
    )
    assert by_uv.returncode == 1
    assert f"`uv run evopolicy record create --store {missing}`" in by_uv.stderr, by_uv.stderr
    from_env = _cli(["record", "show", "nope"], tmp_path, **{STORE_ENV: str(recorded.store)})
    assert from_env.returncode == 1
    # Pasted in the same shell, it finds the store in the environment again.
    assert "(see `evopolicy record list`)" in from_env.stderr, from_env.stderr
    hint = re.search(r"`([^`]+)`", by_uv.stderr)
    assert hint is not None
    # Pasted as printed (where uv can run this venv's evopolicy), it creates that store.
    if shutil.which("uv") is not None and sys.prefix != sys.base_prefix:
        created = subprocess.run(
            shlex.split(hint.group(1)),
            cwd=tmp_path,
            env=_env(VIRTUAL_ENV=sys.prefix),
            capture_output=True,
            text=True,
        )
        assert created.returncode == 0, created.stderr
        assert (tmp_path / "no store" / "events.db").is_file()


@pytest.mark.parametrize(
    "command", [["resume", "abc"], ["query", "select 1"], ["record", "show", "abc"]]
)
def test_a_store_that_is_a_file_is_refused_without_suggesting_to_create_it(
    tmp_path: Path, command: list[str]
) -> None:
    file = tmp_path / "afile"
    file.write_text("mine")
    result = _cli([*command, "--store", str(file)], tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"error: --store {file}: {file} is not a directory (a store is one)\n"
    assert file.read_text() == "mine"
