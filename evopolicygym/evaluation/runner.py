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
import select
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


def _pack(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def _send(sock: socket.socket, message: Any) -> None:
    sock.sendall(_pack(message))


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
    # The Host decides what Ctrl-C means (a resumable interruption), not a runner dying
    # mid-Episode as a trusted fault: it starts us out of the terminal's process group, and a
    # SIGINT sent here all the same is ignored.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    runner: EpisodeRunner | None = None
    try:
        # First the Host's import path and, where it has one at hand, the Benchmark to come:
        # unpickling it imports its modules now, while the Host starts its fork server and
        # plays its own first Episodes, rather than at setup.
        _, path, benchmark_blob = _recv(sock)
        sys.path[:] = [p for p in path if p] + [p for p in sys.path if p not in path]
        if benchmark_blob:
            with contextlib.suppress(Exception):  # setup reports what fails here
                pickle.loads(benchmark_blob)
        # Booted: the Host hands out Episodes from now on (it does not wait for a runner
        # still importing when its own thread has played them all).
        sock.sendall(_pack(("ready", None)))
    except (EOFError, OSError):
        return

    def answer(reply: tuple[str, Any]) -> bool:
        """Send ``reply``; False once the Host has gone away (closed or reset its end)."""
        try:
            data = _pack(reply)
        except Exception as exc:  # a result that does not pickle is the request's error
            data = _pack(("error", _picklable(exc)))
        try:
            sock.sendall(data)
        except OSError:
            return False
        return True

    def stop() -> None:
        # The Host is closing this channel or has gone: nobody reads a fault from here on.
        if runner is not None:
            with contextlib.suppress(Exception):
                runner.close()

    while True:
        try:
            message = _recv(sock)
        except (EOFError, OSError):
            # The Host closed its end, or went away (a stopped Host resets a socket it left
            # answers unread in): the end, not a fault, and nobody to tell.
            message = ("exit",)
        if message[0] == "exit":
            stop()
            return
        kind = message[0]
        reply: tuple[str, Any]
        if kind == "setup":
            _, path, benchmark_blob, address, program_dir, scratch_root, config, cpu = message
            if runner is not None:
                runner.close()
                runner.client.close()
            try:
                # The Host's import path, so a Benchmark defined in the Host's modules
                # unpickles here.
                sys.path[:] = [p for p in path if p] + [p for p in sys.path if p not in path]
                benchmark = pickle.loads(benchmark_blob)
                if cpu is not None:
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(0, {cpu})
                runner = EpisodeRunner(
                    benchmark, ForkServerClient(address), program_dir, scratch_root, config, cpu
                )
                reply = ("ok", None)
            except BaseException as exc:
                reply = ("error", _picklable(exc))
        elif kind == "release":
            # End of an evaluation: stop the spare policy process, reap the closed ones.
            try:
                if runner is not None:
                    runner.close()
                reply = ("ok", None)
            except BaseException as exc:
                reply = ("error", _picklable(exc))
        elif kind == "run":
            try:
                assert runner is not None, "run before setup"
                reply = ("ok", runner.run(message[1]))
            except BaseException as exc:
                reply = ("error", _picklable(exc))
        else:
            continue
        if not answer(reply):
            # Whatever this request met while the Host was going away has no reader.
            stop()
            return


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.dumps(exc)
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class RunnerProcess:
    """Host-side handle of one runner process."""

    def __init__(self, cpu: int | None = None, benchmark_blob: bytes = b"") -> None:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
        self.process = _spawn(
            lambda: subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from evopolicygym.evaluation.runner import main; main()",
                    str(child.fileno()),
                    str(os.getpid()),
                ],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
                # Out of the terminal's process group, like the fork server: Ctrl-C is the
                # Host's to handle, and would otherwise hit a runner still importing.
                start_new_session=True,
            )
        )
        child.close()
        if cpu is not None:
            # It boots on the CPU it will play on, off the one the Host's own Episodes use.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.process.pid, {cpu})
        self.sock = host
        with contextlib.suppress(OSError):  # a runner that died at once says so at its first call
            _send(host, ("boot", list(sys.path), benchmark_blob))
        self.lock = threading.Lock()
        self.ready = False  # its hello read: it has booted
        self.used = False  # it was given work

    def _hello(self) -> None:
        try:
            status, _ = _recv(self.sock)
        except (EOFError, OSError) as exc:
            raise RuntimeError(
                f"Episode runner process died (exit code {self.process.poll()})"
            ) from exc
        if status != "ready":
            raise RuntimeError(f"Episode runner process sent {status!r} before its hello")
        self.ready = True

    def wait_ready(self, give_up: Callable[[], bool], poll_s: float = 0.01) -> bool:
        """Wait until the runner has booted; False as soon as ``give_up()`` says its work
        has gone elsewhere (it keeps booting, for a later call)."""
        with self.lock:
            while not self.ready:
                if give_up():
                    return False
                readable, _, _ = select.select([self.sock], [], [], poll_s)
                if readable:
                    self._hello()
            return True

    def call(self, *message: Any) -> Any:
        """Send one request and wait for its answer; re-raises the runner's exception."""
        with self.lock:
            if not self.ready:
                self._hello()
            self.used = True
            try:
                _send(self.sock, message)
                status, value = _recv(self.sock)
            except (EOFError, OSError) as exc:
                raise RuntimeError(
                    f"Episode runner process died (exit code {self.process.poll()})"
                ) from exc
        if status == "error":
            raise value
        return value

    def interrupt(self) -> None:
        """End the request under way (its call raises) and the runner with it: both ends of
        the channel are shut, which the runner takes as the end. Safe in a signal handler."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        idle = self.lock.acquire(blocking=False)
        if idle or not self.used:
            # Booting, or between requests (a released runner has stopped and reaped its
            # policies, and the fork server ends whatever a closed connection leaves): nothing
            # of it to wind down, so no interpreter shutdown (~50-80 ms) to wait for.
            with contextlib.suppress(OSError):
                self.process.kill()
        if idle:
            self.lock.release()
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
