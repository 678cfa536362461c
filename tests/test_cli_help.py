"""Every option of every ``evopolicy`` command says what it is for.

The walk resolves each command the way ``evopolicy`` does (main.py loads them lazily), so a
command or option added later without help fails here.
"""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from tests.support.cli import COMMANDS


def test_the_walk_reaches_every_command() -> None:
    paths = {path for path, _command in COMMANDS}
    for expected in (
        "evopolicy run",
        "evopolicy resume",
        "evopolicy evaluate",
        "evopolicy benchmarks check",
        "evopolicy record events",
        "evopolicy session submit",
        "evopolicy agents list",
    ):
        assert expected in paths
    assert len(paths) >= 25


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _c in COMMANDS])
def test_every_option_has_help(path: str, command: click.Command) -> None:
    missing = [
        "/".join(param.opts)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()
    ]
    assert not missing, f"{path}: options without help: {', '.join(missing)}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _c in COMMANDS])
def test_every_argument_is_explained_by_the_command_help(path: str, command: click.Command) -> None:
    """Arguments have no help of their own in click: the command's help names each one by
    the metavar its usage line shows."""
    ctx = click.Context(command, info_name=path.rsplit(" ", 1)[-1])
    text = command.help or ""
    unexplained = []
    for param in command.params:
        if isinstance(param, click.Argument):
            name = param.make_metavar(ctx).rstrip(".").strip("[]").rstrip(".")
            if name not in text:
                unexplained.append(name)
    assert text.strip(), f"{path} has no help text"
    assert not unexplained, f"{path}: help does not mention {', '.join(unexplained)}"


def _help(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", *args, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "PATH": ""},
    )
    return " ".join(done.stdout.split())


def test_timeouts_say_seconds_and_memory_says_what_it_limits() -> None:
    run_help = _help("run")
    assert "--episode-timeout FLOAT RANGE Seconds of policy time per Episode" in run_help
    assert "--agent-timeout FLOAT RANGE Wall-clock seconds each Agent attempt" in run_help
    assert "[default: 3600.0; 0<x<=2592000]" in run_help
    evaluate_help = _help("evaluate")
    assert "--episode-timeout FLOAT RANGE Seconds of policy time per Episode" in evaluate_help
    assert "--memory-mb INTEGER RANGE Megabytes of address space" in evaluate_help
    assert "a small policy runs even at 1" in evaluate_help


def test_effort_help_lists_the_levels_the_error_accepts() -> None:
    from evopolicygym.agents.providers import _EFFORTS

    run_help = _help("run")
    listed = run_help.split("--effort LEVEL Reasoning effort (codex): ", 1)[1].split(
        " [default", 1
    )[0]
    assert listed == ", ".join(_EFFORTS[:-1]) + f" or {_EFFORTS[-1]}"
