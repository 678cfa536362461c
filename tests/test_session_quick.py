"""The Agent's plain ``evopolicy session`` command lines are served without click or msgspec,
and that path is indistinguishable from the click commands: the same requests reach the
Host, the same output, the same exit status; anything it does not take goes to click."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.cli.group import main
from evopolicygym.cli.session import finish as finish_command
from evopolicygym.cli.session import submit as submit_command
from evopolicygym.cli.session_fastpath import _parse
from evopolicygym.protocol import SESSION_ENV, WORKSPACE_ENV
from evopolicygym.run.session_server import SessionServer

pytestmark = pytest.mark.timeout(120)

HEAVY = (
    "click",
    "msgspec",
    "numpy",
    "gymnasium",
    "sqlalchemy",
    "evopolicygym.run",
    "evopolicygym.cli.group",
)


class Host:
    """Answers submit with what it received and rejects finish with candidate 9."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        if request["op"] == "finish" and 9 in request["candidates"]:
            return {
                "ok": False,
                "error": {"code": "unknown_submission", "message": "no Submission 9 — é"},
            }
        files = request.get("files") or {}
        return {
            "ok": True,
            "result": {
                "files": sorted(files),
                "size": sum(map(len, files.values())),
                "note": "naïve\n",
                "x": 1.5,
            },
        }


@pytest.fixture
def host() -> Iterator[tuple[Host, SessionServer]]:
    handler = Host()
    with SessionServer(handler) as server:
        yield handler, server


@pytest.fixture
def program(tmp_path: Path) -> Path:
    directory = tmp_path / "program"
    (directory / "lib").mkdir(parents=True)
    (directory / "policy.py").write_text("def make_policy(context):\n    return None\n")
    (directory / "lib" / "w.bin").write_bytes(bytes(range(256)) * 3)
    return directory


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in (SESSION_ENV, WORKSPACE_ENV)}
    return {**base, **extra}


def _process(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "session", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def _in_process(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["session", *args], env=env, prog_name="evopolicy")
    return result.exit_code, result.stdout, result.stderr


def _comparable(request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != "request_id"}


def test_the_quick_path_and_click_send_and_print_the_same(
    host: tuple[Host, SessionServer], program: Path, tmp_path: Path
) -> None:
    handler, server = host
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "link.py").symlink_to(program / "policy.py")
    (tmp_path / "worse").mkdir()
    os.symlink(
        program / "policy.py", os.fsdecode(bytes(tmp_path / "worse") + b"/l\xff")
    )  # not UTF-8
    cases = [
        ["submit", str(program), "--episodes", "0:2,5", "--socket", server.path],
        ["submit", "--episodes", "3", "--parent", "0", str(program), "--socket", server.path],
        [
            "submit",
            str(tmp_path / "bad"),
            "--episodes",
            "1",
            "--socket",
            server.path,
        ],  # invalid program
        [
            "submit",
            str(tmp_path / "worse"),
            "--episodes",
            "1",
            "--socket",
            server.path,
        ],  # and its name
        ["submit", str(tmp_path / "missing"), "--episodes", "1", "--socket", server.path],
        ["submit", "--episodes", "4"],  # program from the workspace, socket from the environment
        ["finish", "2", "0", "--socket", server.path],
        ["finish", "9"],  # rejected: exit 1, JSON on stderr
        ["finish", "1", "--socket", str(tmp_path / "nowhere.sock")],  # cannot connect: exit 2
    ]
    env = _env(**{SESSION_ENV: server.path, WORKSPACE_ENV: str(program.parent)})
    for args in cases:
        before = len(handler.requests)
        quick = _process(args, env)
        sent_quick = [_comparable(r) for r in handler.requests[before:]]
        clicked = _in_process(args, env)
        sent_click = [_comparable(r) for r in handler.requests[before + len(sent_quick) :]]
        assert quick == clicked, args
        assert sent_quick == sent_click, args
    statuses = [_process(args, env)[0] for args in cases]
    assert statuses == [0, 0, 0, 0, 0, 0, 0, 1, 2]
    submitted = [r for r in handler.requests if r["op"] == "submit" and r["files"] is not None]
    assert submitted[0]["files"]["lib/w.bin"] == bytes(range(256)) * 3  # bytes arrive whole
    assert any(r["op"] == "submit" and "symlink" in (r["problem"] or "") for r in handler.requests)
    assert any("l\\udcff" in (r.get("problem") or "") for r in handler.requests)  # shown escaped


def test_a_plain_submit_loads_neither_click_nor_msgspec(
    host: tuple[Host, SessionServer], program: Path
) -> None:
    _handler, server = host
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "evopolicygym.cli",
            "session",
            "submit",
            str(program),
            "--episodes",
            "0",
            "--socket",
            server.path,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["files"] == ["lib/w.bin", "policy.py"]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "evopolicygym.cli.session_fastpath" in modules
    assert sorted(m for m in modules if m.startswith(HEAVY)) == []
    assert not any(m.startswith(("typing", "dataclasses", "pathlib")) for m in modules), sorted(
        modules
    )


def test_the_console_script_takes_the_quick_path(
    host: tuple[Host, SessionServer], program: Path
) -> None:
    script = shutil.which("evopolicy", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("no evopolicy console script installed")
    _handler, server = host
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            script,
            "session",
            "finish",
            "3",
            "--socket",
            server.path,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "click" not in {
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if "|" in line
    }


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "--help"],
        ["submit", "-h"],
        ["submit", "--episodes=0"],
        ["submit", "--episodes", "0", "--parent", "-1"],
        ["submit", "--episodes", "0", "--parent", "٣"],
        ["submit", "--episodes", "0", "--socket", ""],
        ["submit", "a", "b", "--episodes", "0"],
        ["finish"],
        ["finish", "--", "1"],
        ["finish", "9223372036854775808"],
        ["status"],
    ],
)
def test_anything_else_goes_to_click(args: list[str]) -> None:
    assert _parse(args) is None


TOKENS = st.sampled_from(
    [
        "--episodes",
        "--parent",
        "--socket",
        "--help",
        "-h",
        "--",
        "--episodes=1",
        "0",
        "7",
        "0:4,6",
        "prog",
        "",
        "-1",
        "x",
        "007",
        "9223372036854775807",
        "9223372036854775808",
        "٣",
        "\udcff",
    ]
)


@settings(max_examples=400, deadline=None)
@given(command=st.sampled_from(["submit", "finish"]), args=st.lists(TOKENS, max_size=7))
def test_what_the_quick_path_reads_click_reads_the_same(command: str, args: list[str]) -> None:
    parsed = _parse([command, *args])
    if parsed is None:
        return
    _, options = parsed
    cmd = submit_command if command == "submit" else finish_command
    ctx = cmd.make_context(command, list(args))  # raises if click would refuse it
    if command == "submit":
        assert ctx.params == {
            "program": options.get("program"),
            "episodes": options["--episodes"],
            "parent": options.get("--parent"),
            "socket_path": options.get("--socket"),
        }
    else:
        assert ctx.params == {"ids": tuple(options["ids"]), "socket_path": options.get("--socket")}
        assert all(0 <= i <= 2**63 - 1 for i in options["ids"])


def test_click_is_still_the_reference_for_help() -> None:
    code, out, _err = _process(["submit", "--help"], _env())
    assert code == 0
    assert "Usage: evopolicy session submit [OPTIONS] [PROGRAM]" in out
    assert isinstance(submit_command, click.Command)
