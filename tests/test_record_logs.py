"""`evopolicy record logs`: what a Run's Agent wrote on stdout and stderr, read back from the
store of Runs recorded by the real CLI (a command Agent that prints, then exits)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.support.cli import CLI, small_run

ENV = {**os.environ, "NO_COLOR": "1"}

# What the Agent below writes, each stream flushed as it goes.
STDOUT = b"out one\nnot utf-8: \xff\xfe end\n"
STDERR = b"err one\n\x1b[31mred\x1b[0m\nerr two\n"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, env=ENV, cwd=cwd)


def _agent(tmp_path: Path, name: str, body: str) -> str:
    prelude = """
        import json, os, subprocess, sys, time
        CLI = json.loads(os.environ["EVOPOLICY_CLI"])
        WORKSPACE = os.environ["EVOPOLICY_WORKSPACE"]

        def cli(*args):
            return subprocess.run([*CLI, "session", *args], capture_output=True).returncode

        def say(stream, data):
            stream.buffer.write(data)
            stream.flush()
        """
    path = tmp_path / name
    path.write_text(textwrap.dedent(prelude) + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def _run_args(store: Path, command: str) -> list[str]:
    """``run`` of a small cartpole Run whose Agent is ``command``, recorded in ``store``."""
    return [*small_run(command, store), "--json"]


def _run(tmp_path: Path, store: Path, command: str) -> subprocess.CompletedProcess[bytes]:
    return _cli(*_run_args(store, command), cwd=tmp_path)


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """A Run whose Agent printed STDOUT and STDERR, then exited 3: (cwd, store, run id, run's
    stderr)."""
    tmp_path = tmp_path_factory.mktemp("logs")
    store = tmp_path / "store"
    command = _agent(
        tmp_path,
        "agent.py",
        f"""
        say(sys.stdout, {STDOUT[:8]!r})
        say(sys.stderr, {STDERR[:8]!r})
        say(sys.stdout, {STDOUT[8:]!r})
        say(sys.stderr, {STDERR[8:]!r})
        sys.exit(3)
        """,
    )
    ran = _run(tmp_path, store, command)
    assert ran.returncode == 3, ran.stderr
    return tmp_path, store, json.loads(ran.stdout)["run_id"], ran.stderr.decode()


def _logs(failed: tuple[Path, Path, str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    cwd, store, run_id, _ = failed
    return _cli("record", "logs", run_id, "--store", str(store), *args, cwd=cwd)


def test_both_streams_under_a_header_each_stdout_first(failed: tuple[Path, Path, str, str]) -> None:
    shown = _logs(failed)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == b""
    assert shown.stdout.decode() == (
        "==> stdout (attempt 1, exited, code 3) <==\n"
        "out one\n"
        "not utf-8: \ufffd\ufffd end\n"
        "==> stderr (attempt 1, exited, code 3) <==\n"
        "err one\n"
        "\\x1b[31mred\\x1b[0m\n"  # control characters cannot drive the reader's terminal
        "err two\n"
    )


def test_one_stream_alone_has_no_header(failed: tuple[Path, Path, str, str]) -> None:
    stderr = _logs(failed, "--stderr")
    assert stderr.returncode == 0
    assert stderr.stdout.decode().splitlines() == ["err one", "\\x1b[31mred\\x1b[0m", "err two"]
    stdout = _logs(failed, "--stdout", "--attempt", "1")
    assert stdout.returncode == 0
    assert stdout.stdout.decode() == "out one\nnot utf-8: \ufffd\ufffd end\n"


def test_raw_writes_the_recorded_bytes_exactly(failed: tuple[Path, Path, str, str]) -> None:
    assert _logs(failed, "--raw", "--stdout").stdout == STDOUT
    assert _logs(failed, "--raw", "--stderr").stdout == STDERR
    both = _logs(failed, "--raw")
    assert both.returncode == 0 and both.stdout == STDOUT + STDERR


def test_json(failed: tuple[Path, Path, str, str]) -> None:
    shown = _logs(failed, "--json")
    assert shown.returncode == 0
    assert json.loads(shown.stdout) == {
        "run_id": failed[2],
        "attempt": 1,
        "attempts": 1,
        "reason": "exited",
        "exit_code": 3,
        "signal": None,
        "stdout": "out one\nnot utf-8: \ufffd\ufffd end\n",
        "stderr": STDERR.decode(),
    }
    only = json.loads(_logs(failed, "--json", "--stderr").stdout)
    assert only["stderr"] == STDERR.decode() and "stdout" not in only


def test_the_hint_the_run_printed_works_when_pasted(failed: tuple[Path, Path, str, str]) -> None:
    cwd, _, run_id, run_stderr = failed
    hints = [line for line in run_stderr.splitlines() if line.startswith("all of its output: ")]
    assert len(hints) == 1, run_stderr
    words = shlex.split(hints[0].split(": ", 1)[1])
    start = words.index("evopolicy")
    assert words[:start] in ([], ["uv", "run"])  # the launcher the user ran, where it can tell
    assert words[start + 1 : start + 4] == ["record", "logs", run_id]
    pasted = _cli(*words[start + 1 :], cwd=cwd)
    assert pasted.returncode == 0
    assert pasted.stdout == _logs(failed).stdout


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--attempt", "2"], 1, "--attempt 2: run {run} has 1 Agent attempt"),
        (["--attempt", "0"], 2, "--attempt"),
        (["--attempt", "x"], 2, "--attempt"),
        (["--stdout", "--stderr"], 2, "--stdout and --stderr exclude each other"),
        (["--raw", "--json"], 2, "--raw and --json exclude each other"),
    ],
)
def test_bad_input_is_one_line(
    failed: tuple[Path, Path, str, str], args: list[str], code: int, says: str
) -> None:
    result = _logs(failed, *args)
    assert result.returncode == code
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert says.format(run=failed[2]) in lines[0]


def test_an_unknown_run_is_one_line(failed: tuple[Path, Path, str, str]) -> None:
    cwd, store, _, _ = failed
    result = _cli("record", "--store", str(store), "logs", "no-such-run", cwd=cwd)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "no run 'no-such-run'" in lines[0], lines


def test_an_agent_that_printed_nothing_is_said_so(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ran = _run(tmp_path, store, _agent(tmp_path, "quiet.py", "sys.exit(3)\n"))
    assert ran.returncode == 3
    run_id = json.loads(ran.stdout)["run_id"]
    for args in ([], ["--raw"], ["--stderr"], ["--json"]):
        result = _cli("record", "logs", run_id, "--store", str(store), *args, cwd=tmp_path)
        assert result.returncode == 1 and result.stdout == b""
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and "the Agent printed nothing on" in lines[0], lines


def test_a_resumed_run_has_two_attempts(tmp_path: Path) -> None:
    """Attempt 1 is SIGINT'd with its Run, attempt 2 finishes it after resume: each is
    shown on its own; the interrupted one kept the stdout it streamed, not its stderr."""
    store = tmp_path / "store"
    command = _agent(
        tmp_path,
        "twice.py",
        """
        marker = os.path.join(WORKSPACE, "analysis", "attempted")
        if os.path.exists(marker):
            say(sys.stdout, b"second out\\n")
            say(sys.stderr, b"second err\\n")
            sys.exit(cli("finish", "1"))
        open(marker, "w").close()
        say(sys.stdout, b"first out\\n")
        say(sys.stderr, b"first err\\n")
        cli("submit", "--episodes", "0:2")
        time.sleep(600)
        """,
    )
    process = subprocess.Popen(
        [*CLI, *_run_args(store, command)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=tmp_path,
    )
    assert process.stderr is not None
    seen = []
    # The Agent sleeps after submitting: a Run that never says so would hang the test.
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        for line in process.stderr:
            seen.append(line)
            if line.startswith("submission 1 "):  # the live view's published line
                break
        else:
            pytest.fail(f"the Run never published its Submission: {''.join(seen)}")
    finally:
        watchdog.cancel()
    process.send_signal(signal.SIGINT)
    out, rest = process.communicate()
    assert process.returncode == 130, "".join(seen) + rest
    run_id = json.loads(out)["run_id"]
    resumed = _cli("resume", run_id, "--store", str(store), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr

    def logs(*args: str) -> subprocess.CompletedProcess[bytes]:
        return _cli("record", "logs", run_id, "--store", str(store), *args, cwd=tmp_path)

    last = logs()
    assert last.returncode == 0
    assert last.stdout.decode() == (
        "==> stdout (attempt 2 of 2, exited, code 0) <==\nsecond out\n"
        "==> stderr (attempt 2 of 2, exited, code 0) <==\nsecond err\n"
    )
    assert logs("--attempt", "2", "--raw").stdout == b"second out\nsecond err\n"
    first = logs("--attempt", "1")
    assert first.returncode == 0
    assert first.stdout.decode().splitlines() == [
        "==> stdout (attempt 1 of 2, host_interrupted) <==",
        "first out",
        "==> stderr (attempt 1 of 2, host_interrupted) <==",
        "(not recorded: the Host was interrupted under this attempt, "
        "so only the stdout it streamed was kept)",
    ]
    assert logs("--attempt", "1", "--stdout", "--raw").stdout == b"first out\n"
    lost = logs("--attempt", "1", "--stderr")
    assert lost.returncode == 1 and lost.stdout == b""
    assert lost.stderr.decode().splitlines() == [
        f"error: run {run_id}, attempt 1: no stderr recorded: the Host was interrupted under this "
        "attempt, so only the stdout it streamed was kept"
    ]
    missing = logs("--attempt", "3")
    assert missing.returncode == 1
    assert (
        missing.stderr.decode().strip()
        == f"error: --attempt 3: run {run_id} has 2 Agent attempts (1 to 2)"
    )


def test_a_reader_that_goes_away_stops_it_quietly(tmp_path: Path) -> None:
    """`record logs RUN | head -1`: exit 0, nothing on stderr, whatever the mode."""
    store = tmp_path / "store"
    command = _agent(tmp_path, "loud.py", 'say(sys.stdout, b"line\\n" * 200_000)\nsys.exit(3)\n')
    ran = _run(tmp_path, store, command)
    assert ran.returncode == 3
    run_id = json.loads(ran.stdout)["run_id"]
    for args in ([], ["--raw"]):
        reader = subprocess.Popen(
            [*CLI, "record", "logs", run_id, "--store", str(store), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV,
            cwd=tmp_path,
        )
        assert reader.stdout is not None and reader.stderr is not None
        assert reader.stdout.readline()
        reader.stdout.close()
        assert reader.wait() == 0
        assert reader.stderr.read() == b""
        reader.stderr.close()
