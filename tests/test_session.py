"""The Session transport: a real SessionServer on a real socket, the real CLI as a subprocess."""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.protocol import (
    MAX_FRAME_BYTES,
    SESSION_ENV,
    WORKSPACE_ENV,
    SessionUnavailable,
    request,
)
from evopolicygym.run.session_server import SessionServer

pytestmark = pytest.mark.timeout(60)

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Recorder:
    """A handler that records each request and answers with a fixed reply."""

    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply = reply or {"ok": True, "result": {"submission": 7, "score": 1.5}}

    def __call__(self, req: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(req)
        return self.reply


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], SessionServer]]:
    servers: list[SessionServer] = []

    def start(handler: Handler) -> SessionServer:
        server = SessionServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (SESSION_ENV, WORKSPACE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "session", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=50,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def raw_exchange(path: str, data: bytes) -> dict[str, Any]:
    """Send raw bytes, half-close, and decode the one reply frame."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    (length,) = struct.unpack(">I", received[:4])
    assert len(received) == 4 + length
    reply: dict[str, Any] = json.loads(received[4:])
    return reply


def frame(body: Any) -> bytes:
    encoded = json.dumps(body).encode()
    return struct.pack(">I", len(encoded)) + encoded


def finish_body(candidates: list[Any]) -> dict[str, Any]:
    return {"op": "finish", "request_id": "r1", "candidates": candidates}


def make_program(root: Path) -> Path:
    program = root / "program"
    (program / "lib").mkdir(parents=True)
    (program / "policy.py").write_text("def make_policy(context):\n    return None\n")
    (program / "lib" / "data.bin").write_bytes(b"\x00\xff binary")
    return program


def test_socket_and_directory_are_private(serve: Callable[[Handler], SessionServer]) -> None:
    server = serve(Recorder())
    assert stat.S_ISSOCK(os.stat(server.path).st_mode)
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(server.path)).st_mode) == 0o700


def test_close_removes_the_socket_directory() -> None:
    with SessionServer(Recorder()) as server:
        directory = os.path.dirname(server.path)
        assert request(server.path, finish_body([1]))["ok"] is True
    assert not os.path.exists(directory)
    with pytest.raises(SessionUnavailable):
        request(server.path, finish_body([1]))


def test_submit_sends_the_program_and_selector(
    serve: Callable[[Handler], SessionServer], tmp_path: Path
) -> None:
    handler = Recorder()
    server = serve(handler)
    program = make_program(tmp_path)
    proc = cli("submit", str(program), "--episodes", "0:2,4:8", env={SESSION_ENV: server.path})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"score": 1.5, "submission": 7}
    assert proc.stdout.index('"score"') < proc.stdout.index('"submission"')  # sorted keys
    [req] = handler.requests
    assert req["op"] == "submit"
    assert req["episodes"] == "0:2,4:8"
    assert req["files"] == {
        "policy.py": b"def make_policy(context):\n    return None\n",
        "lib/data.bin": b"\x00\xff binary",
    }
    assert req["problem"] is None
    assert req["parent"] is None  # not said
    assert len(req["request_id"]) == 32
    proc = cli(
        "submit", str(program), "--episodes", "1", "--parent", "0", env={SESSION_ENV: server.path}
    )
    assert proc.returncode == 0, proc.stderr
    assert handler.requests[-1]["parent"] == 0  # edited from the initial program


def test_submit_defaults_to_the_workspace_program(
    serve: Callable[[Handler], SessionServer], tmp_path: Path
) -> None:
    handler = Recorder()
    server = serve(handler)
    make_program(tmp_path)
    env = {SESSION_ENV: server.path, WORKSPACE_ENV: str(tmp_path)}
    proc = cli("submit", "--episodes", "3", env=env)
    assert proc.returncode == 0, proc.stderr
    [req] = handler.requests
    assert set(req["files"]) == {"policy.py", "lib/data.bin"}


def test_socket_option_overrides_the_environment(
    serve: Callable[[Handler], SessionServer], tmp_path: Path
) -> None:
    handler = Recorder()
    server = serve(handler)
    env = {SESSION_ENV: str(tmp_path / "nowhere.sock")}
    proc = cli("finish", "2", "--socket", server.path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert [r["candidates"] for r in handler.requests] == [[2]]


def test_invalid_program_is_still_submitted_with_its_problem(
    serve: Callable[[Handler], SessionServer], tmp_path: Path
) -> None:
    handler = Recorder()
    server = serve(handler)
    program = make_program(tmp_path)
    (program / "link.py").symlink_to(program / "policy.py")
    proc = cli("submit", str(program), "--episodes", "3", env={SESSION_ENV: server.path})
    assert proc.returncode == 0, proc.stderr
    [req] = handler.requests
    assert req["files"] is None
    assert "symlink" in req["problem"]


def test_rejection_exits_1_with_json_on_stderr(
    serve: Callable[[Handler], SessionServer],
) -> None:
    error = {"code": "budget_exhausted", "message": "no Episodes left"}
    handler = Recorder({"ok": False, "error": error})
    server = serve(handler)
    proc = cli("finish", "3", "1", env={SESSION_ENV: server.path})
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert json.loads(proc.stderr) == {"error": error}
    [req] = handler.requests
    assert req["op"] == "finish"
    assert req["candidates"] == [3, 1]


def test_no_session_configured_exits_2(tmp_path: Path) -> None:
    make_program(tmp_path)
    line = assert_one_line_error(
        cli("submit", "--episodes", "0", env={WORKSPACE_ENV: str(tmp_path)})
    )
    assert SESSION_ENV in line
    assert SESSION_ENV in assert_one_line_error(cli("finish", "1"))


def test_server_gone_exits_2(tmp_path: Path) -> None:
    server = SessionServer(Recorder()).start()
    path = server.path
    server.close()
    line = assert_one_line_error(cli("finish", "1", env={SESSION_ENV: path}))
    assert "cannot connect" in line


def test_dropped_connection_exits_2(tmp_path: Path) -> None:
    # A listener that accepts and closes without replying.
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen()

        def drop() -> None:
            conn, _ = listener.accept()
            conn.close()

        thread = threading.Thread(target=drop)
        thread.start()
        line = assert_one_line_error(cli("finish", "1", env={SESSION_ENV: path}))
        thread.join()
    assert "dropped" in line


@pytest.mark.parametrize(
    "args",
    [("finish",), ("finish", "x"), ("finish", "1", "2.5"), ("finish", "--", "-1"), ("submit",)],
)
def test_bad_arguments_exit_2(serve: Callable[[Handler], SessionServer], args: tuple[str]) -> None:
    handler = Recorder()
    server = serve(handler)
    assert_one_line_error(cli(*args, env={SESSION_ENV: server.path}))
    assert handler.requests == []


def test_help_explains_the_selector() -> None:
    proc = cli("submit", "--help")
    assert proc.returncode == 0
    for text in ("0:4", "0:2,4:8", "half-open", "strictly increasing", "budget again"):
        assert text in proc.stdout


MALFORMED = {
    "garbage": b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1",
    "empty body": b"\x00\x00\x00\x00",
    "truncated header": b"\x00\x01",
    "truncated body": b"\x00\x00\x00\x10abc",
    "oversize": struct.pack(">I", MAX_FRAME_BYTES + 1),
    "not a dict": frame([1, 2, 3]),
    "unknown op": frame({"op": "delete", "request_id": "r1"}),
    "no op": frame({"request_id": "r1", "candidates": [1]}),
    "missing field": frame({"op": "finish", "request_id": "r1"}),
    "extra field": frame({**finish_body([1]), "budget": 10**6}),
    "empty request_id": frame({**finish_body([1]), "request_id": ""}),
    "long request_id": frame({**finish_body([1]), "request_id": "r" * 201}),
    "bool candidate": frame(finish_body([True])),
    "str candidate": frame(finish_body(["1"])),
    "too many candidates": frame(finish_body(list(range(1001)))),
    "number as file content": frame(
        {"op": "submit", "request_id": "r", "episodes": "1", "files": {"a": 1}, "problem": None}
    ),
    "file content not base64": frame(
        {"op": "submit", "request_id": "r", "episodes": "1", "files": {"a": "x!"}, "problem": None}
    ),
    "msgpack": struct.pack(">I", 11) + b"\x81\xa2op\xa6finish",
    "long selector": frame(
        {"op": "submit", "request_id": "r", "episodes": "1" * 1001, "files": {}, "problem": None}
    ),
    "files and problem": frame(
        {"op": "submit", "request_id": "r", "episodes": "1", "files": {}, "problem": "bad"}
    ),
    "neither files nor problem": frame(
        {"op": "submit", "request_id": "r", "episodes": "1", "files": None, "problem": None}
    ),
}


_DEEP = b'{"op":"submit","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
MALFORMED["nested too deeply"] = struct.pack(">I", len(_DEEP)) + _DEEP


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_requests_are_refused_and_serving_goes_on(
    serve: Callable[[Handler], SessionServer], name: str
) -> None:
    handler = Recorder()
    server = serve(handler)
    reply = raw_exchange(server.path, MALFORMED[name])
    assert reply["ok"] is False
    assert reply["error"]["code"] == "invalid_request"
    assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]
    # The handler hears of it only as "malformed" (to record the rejection), never its body;
    # and an "ok" answer from it cannot turn a malformed request into an accepted one.
    assert [sorted(r) for r in handler.requests] == [["message", "op"]]
    assert handler.requests[0]["op"] == "malformed"
    assert request(server.path, finish_body([1])) == handler.reply
    assert len(handler.requests) == 2


def test_a_silent_client_is_dropped_and_serving_goes_on() -> None:
    handler = Recorder()
    with SessionServer(handler, read_timeout=0.2) as server:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stuck:
            stuck.connect(server.path)
            stuck.sendall(b"\x00\x00")  # half a header, then nothing
            stuck.settimeout(30)
            assert stuck.recv(1) == b""  # the server gave up on it
        assert request(server.path, finish_body([1]))["ok"] is True


def test_handler_errors_become_internal_error(
    serve: Callable[[Handler], SessionServer],
) -> None:
    calls: list[dict[str, Any]] = []

    def handler(req: dict[str, Any]) -> dict[str, Any]:
        calls.append(req)
        if len(calls) == 1:
            raise RuntimeError("store\nis broken")
        if len(calls) == 2:
            return {"ok": "yes"}  # malformed reply
        return {"ok": True, "result": {}}

    server = serve(handler)
    first = request(server.path, finish_body([1]))
    assert first["error"]["code"] == "internal_error"
    assert "store" not in first["error"]["message"]  # Host detail stays in the Host's log
    assert request(server.path, finish_body([1]))["error"]["code"] == "internal_error"
    assert request(server.path, finish_body([1])) == {"ok": True, "result": {}}


def test_requests_are_handled_one_at_a_time(
    serve: Callable[[Handler], SessionServer],
) -> None:
    others = 6
    lock = threading.Lock()
    active = 0
    peak = 0
    first_entered = threading.Event()
    others_sent = threading.Event()
    handled: list[str] = []

    def handler(req: dict[str, Any]) -> dict[str, Any]:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        # The first request holds the handler until every other request is on the wire.
        if req["request_id"] == "first":
            first_entered.set()
            assert others_sent.wait(30)
        with lock:
            handled.append(req["request_id"])
            active -= 1
        return {"ok": True, "result": {"id": req["request_id"]}}

    server = serve(handler)
    replies: dict[str, dict[str, Any]] = {}

    def call(request_id: str) -> None:
        replies[request_id] = request(server.path, {**finish_body([1]), "request_id": request_id})

    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert first_entered.wait(30)
    # Raw clients, so the test knows when each request has been sent.
    sockets = []
    for i in range(others):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(server.path)
        sock.sendall(frame({**finish_body([1]), "request_id": f"other-{i}"}))
        sockets.append(sock)
    others_sent.set()
    first.join()
    for i, sock in enumerate(sockets):
        with sock:
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert json.loads(received[4:])["result"] == {"id": f"other-{i}"}
    assert replies["first"]["result"] == {"id": "first"}
    assert peak == 1
    assert sorted(handled) == sorted(["first", *(f"other-{i}" for i in range(others))])


def test_directories_of_dead_hosts_are_swept() -> None:
    """A SIGKILLed Host leaves its socket directory; the next one removes it (not live ones)."""
    import shutil
    import tempfile

    from evopolicygym.hostdirs import private_dir

    tmp_path = Path(tempfile.mkdtemp(prefix="eps-"))  # short: socket paths are limited

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"evopolicy-session-{gone.stdout.strip()}-abc"
    alive = tmp_path / f"evopolicy-session-{os.getpid()}-def"
    other = tmp_path / "evopolicy-session-notapid"
    for directory in (dead, alive, other):
        directory.mkdir()
    server = SessionServer(Recorder(), directory=str(tmp_path))
    try:
        assert not dead.exists() and alive.exists() and other.exists()
        assert Path(server.path).parent.name.startswith(f"evopolicy-session-{os.getpid()}-")
        made = private_dir("evopolicy-session-", str(tmp_path))
        assert oct(os.stat(made).st_mode & 0o777) == "0o700"
    finally:
        server.close()
        shutil.rmtree(tmp_path)
