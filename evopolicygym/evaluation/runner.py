"""Episode runner processes for parallel evaluation.

Each runner is a trusted Host process (a fresh interpreter, started once and
reused across evaluations) that drives its own Environments and talks to the
policy fork server, so parallel Episodes never share the Host's GIL. The Host
talks to a runner over a socket pair with length-prefixed pickles; both ends
are trusted, policies never see this channel.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["RunnerProcess"]

T = TypeVar("T")


def _spawn(start: Callable[[], T]) -> T:
    # Imported here: the server and runner children import this module and need none of it.
    from evopolicygym.evaluation.spawner import spawn

    return spawn(start)


_LENGTH = struct.Struct("<Q")


def _send(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> Any:
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    return pickle.loads(_recv_exact(sock, length))


def main() -> None:
    from evopolicygym.evaluation.episode import EpisodeRunner
    from evopolicygym.evaluation.forkserver import ForkServerClient
    from evopolicygym.namespaces import die_with_parent

    die_with_parent(int(sys.argv[2]))
    # Ctrl-C reaches the whole foreground process group; the Host decides what it means
    # (a resumable interruption), not a runner dying mid-Episode as a trusted fault.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    runner: EpisodeRunner | None = None
    while True:
        try:
            message = _recv(sock)
        except EOFError:
            message = ("exit",)
        if message[0] == "exit":
            if runner is not None:
                runner.close()
            return
        kind = message[0]
        if kind == "setup":
            _, path, benchmark_blob, address, program_dir, scratch_root, config, cpu = message
            if runner is not None:
                runner.close()
                runner.client.close()
            try:
                # The Host's import path, so a Benchmark defined in the Host's modules unpickles here.
                sys.path[:] = [p for p in path if p] + [p for p in sys.path if p not in path]
                benchmark = pickle.loads(benchmark_blob)
                if cpu is not None:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(0, {cpu})
                runner = EpisodeRunner(benchmark, ForkServerClient(address), program_dir, scratch_root, config, cpu)
                _send(sock, ("ok", None))
            except BaseException as exc:
                _send(sock, ("error", _picklable(exc)))
        elif kind == "release":
            # End of an evaluation: stop the spare policy process, reap the closed ones.
            try:
                if runner is not None:
                    runner.close()
                _send(sock, ("ok", None))
            except BaseException as exc:
                _send(sock, ("error", _picklable(exc)))
        elif kind == "run":
            try:
                assert runner is not None, "run before setup"
                _send(sock, ("ok", runner.run(message[1])))
            except BaseException as exc:
                _send(sock, ("error", _picklable(exc)))


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.dumps(exc)
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class RunnerProcess:
    """Host-side handle of one runner process."""

    def __init__(self) -> None:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
        self.process = _spawn(
            lambda: subprocess.Popen(
                [sys.executable, "-c", "from evopolicygym.evaluation.runner import main; main()", str(child.fileno()), str(os.getpid())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        )
        child.close()
        self.sock = host
        self.lock = threading.Lock()

    def call(self, *message: Any) -> Any:
        """Send one request and wait for its answer; re-raises the runner's exception."""
        with self.lock:
            try:
                _send(self.sock, message)
                status, value = _recv(self.sock)
            except (EOFError, OSError) as exc:
                raise RuntimeError(f"Episode runner process died (exit code {self.process.poll()})") from exc
        if status == "error":
            raise value
        return value

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
