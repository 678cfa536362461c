"""Start-up of ``evopolicy``: listing and help import no subcommand's heavy dependencies.

These check which modules are imported (a module list), never how long it takes; the
figures are in tests/perf/bench_cli.py.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evopolicygym.cli import main
from evopolicygym.cli.group import _COMMANDS, _LazyCli, _summary

HEAVY = ("numpy", "pandas", "pyarrow", "datasets", "gymnasium", "torch", "duckdb", "sqlalchemy")

# Runs the CLI as `python -m evopolicygym.cli ARGS...` does, then writes the names of the
# modules it imported to the file named by the first argument.
_PROBE = """
import json, runpy, sys
out = sys.argv[1]
sys.argv = ["evopolicy", *sys.argv[2:]]
try:
    runpy.run_module("evopolicygym.cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _imported(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(out.read_text())
    assert probe["code"] in (0, None), done.stderr
    return done.stdout, set(probe["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.partition(".")[0] in HEAVY)


def test_help_lists_every_command_without_importing_any(tmp_path: Path) -> None:
    out, modules = _imported(tmp_path, "--help")
    assert _heavy(modules) == []
    for name, entry in _COMMANDS.items():
        assert name in out
        assert entry.target.partition(":")[0] not in modules


def test_session_submit_help_is_light(tmp_path: Path) -> None:
    out, modules = _imported(tmp_path, "session", "submit", "--help")
    assert _heavy(modules) == []
    assert "Usage: evopolicy session submit [OPTIONS] [PROGRAM]" in out
    assert "--episodes SELECTOR" in out
    # Only the session's own module is loaded, not its siblings'.
    loaded = {entry.target.partition(":")[0] for entry in _COMMANDS.values()} & modules
    assert loaded == {"evopolicygym.cli.session"}


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_the_table_lists_each_command_as_the_command_itself_would(name: str) -> None:
    entry = _COMMANDS[name]
    module, _, attr = entry.target.partition(":")
    real = getattr(importlib.import_module(module), attr)
    assert isinstance(real, click.Command)
    assert not real.hidden
    assert entry.from_docstring == (not real.short_help)
    stand_in = _summary(name, entry)
    for limit in (10, 30, 45, 60, 80, 1000):
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), (name, limit)
    assert main.get_command(click.Context(main), name) is real


class _Eager(_LazyCli):
    """The same group listed the way click lists it: by loading every command."""

    format_commands = click.Group.format_commands
    shell_complete = click.Group.shell_complete


@pytest.mark.parametrize("width", [40, 80, 120])
def test_help_is_what_loading_every_command_would_print(width: int) -> None:
    eager = _Eager(
        name=main.name,
        callback=main.callback,
        params=main.params,
        help=main.help,
        context_settings=main.context_settings,
    )
    runner = CliRunner()
    lazy_help = runner.invoke(main, ["--help"], prog_name="evopolicy", terminal_width=width)
    eager_help = runner.invoke(eager, ["--help"], prog_name="evopolicy", terminal_width=width)
    assert lazy_help.exit_code == eager_help.exit_code == 0
    assert lazy_help.output == eager_help.output


@pytest.mark.parametrize("incomplete", ["", "r", "se", "zz"])
def test_completion_is_what_loading_every_command_would_offer(incomplete: str) -> None:
    eager = _Eager(name=main.name, callback=main.callback, params=main.params)
    lazy = [(c.value, c.help) for c in main.shell_complete(click.Context(main), incomplete)]
    loaded = [(c.value, c.help) for c in eager.shell_complete(click.Context(eager), incomplete)]
    assert lazy == loaded


def test_errors_still_come_as_one_line() -> None:
    result = CliRunner().invoke(main, ["no-such-command"], prog_name="evopolicy")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: No such command 'no-such-command'.")
    assert len(result.stderr.strip().splitlines()) == 1
