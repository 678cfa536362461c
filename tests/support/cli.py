"""Running ``evopolicy`` in tests: in this process through click's runner (``invoke``,
``one_line_error``) or as a subprocess (``CLI``, ``cli``); the options of a small Run
(``SMALL``); every command and group, resolved as ``evopolicy`` resolves them (``COMMANDS``).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner, Result

from evopolicygym.cli import main


def invoke(*args: str) -> Result:
    # click < 8.2 mixes stderr into stdout unless told not to; 8.2+ always keeps them apart.
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    runner = CliRunner(**options)
    result = runner.invoke(main, list(args), prog_name="evopolicy")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@dataclass(frozen=True)
class Done:
    code: int
    stdout: str
    stderr: str


def cli(*args: str, columns: int = 80, cwd: Path | None = None) -> Done:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    env.pop("EVOPOLICY_STORE", None)
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)


CLI = [sys.executable, "-m", "evopolicygym.cli"]


SMALL = [
    "--budget",
    "4",
    "--validation-episodes",
    "2",
    "--max-candidates",
    "1",
    "--assessment-episodes",
    "2",
]


def small_run(command: str, store: str | Path) -> list[str]:
    """``run`` of a SMALL cartpole Run whose Agent is the uncontained ``command``, recorded
    in ``store``: the arguments after ``evopolicy``."""
    return [
        "run",
        "--benchmark",
        "cartpole",
        "--agent",
        "command",
        "--agent-command",
        command,
        *SMALL,
        "--allow-uncontained-agent",
        "--store",
        str(store),
    ]


def _commands() -> list[tuple[str, click.Command]]:
    """(command path, command) for every command and group under ``evopolicy``."""
    found: list[tuple[str, click.Command]] = []

    def walk(path: str, command: click.Command, parent: click.Context | None) -> None:
        found.append((path, command))
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"{path} lists {name} but does not resolve it"
                walk(f"{path} {name}", sub, ctx)

    walk("evopolicy", main, None)
    return found


COMMANDS = _commands()
