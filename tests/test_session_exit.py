"""``evopolicy session`` ends its process as soon as the reply is out: the whole reply still
reaches a pipe, the exit status is the command's, and a caller running the command in its
own process (click's runner) gets control back instead of losing its process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evopolicygym.cli import main
from evopolicygym.protocol import SESSION_ENV, WORKSPACE_ENV
from evopolicygym.run.session_server import SessionServer

pytestmark = pytest.mark.timeout(60)

BIG = "x" * (4 * 1024 * 1024)  # far beyond a pipe's buffer: the reader drains while it is written


@pytest.fixture
def program(tmp_path: Path) -> Path:
    directory = tmp_path / "program"
    directory.mkdir()
    (directory / "policy.py").write_text("def make_policy(context):\n    return None\n")
    return directory


@pytest.fixture
def server() -> Iterator[SessionServer]:
    def handler(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "finish":
            return {"ok": False, "error": {"code": "too_early", "message": BIG}}
        return {"ok": True, "result": {"request_id": request["request_id"], "note": BIG}}

    with SessionServer(handler) as served:
        yield served


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (SESSION_ENV, WORKSPACE_ENV)}


@pytest.mark.parametrize("how", ["module", "script"])
def test_a_large_reply_reaches_the_pipe_whole(
    server: SessionServer, program: Path, how: str
) -> None:
    if how == "script":
        script = shutil.which("evopolicy", path=str(Path(sys.executable).parent)) or shutil.which(
            "evopolicy"
        )
        if script is None:
            pytest.skip("no evopolicy console script installed")
        cli = [script]
    else:
        cli = [sys.executable, "-m", "evopolicygym.cli"]
    done = subprocess.run(
        [*cli, "session", "submit", str(program), "--episodes", "0", "--socket", server.path],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=50,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reply = json.loads(done.stdout)
    assert reply["note"] == BIG
    assert len(reply["request_id"]) == 32
    int(reply["request_id"], 16)  # hex digits
    rejected = subprocess.run(
        [*cli, "session", "finish", "1", "--socket", server.path],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=50,
    )
    assert rejected.returncode == 1
    assert rejected.stdout == ""
    assert json.loads(rejected.stderr) == {"error": {"code": "too_early", "message": BIG}}


def test_in_process_the_caller_gets_control_back(server: SessionServer, program: Path) -> None:
    runner = CliRunner()
    args = ["session", "submit", str(program), "--episodes", "0", "--socket", server.path]
    first = runner.invoke(main, args, catch_exceptions=False)
    second = runner.invoke(main, args, catch_exceptions=False)
    assert first.exit_code == second.exit_code == 0
    ids = {json.loads(first.stdout)["request_id"], json.loads(second.stdout)["request_id"]}
    assert len(ids) == 2  # a fresh id per request
    rejected = runner.invoke(main, ["session", "finish", "1", "--socket", server.path])
    assert rejected.exit_code == 1
