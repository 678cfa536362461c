"""A pre-warmed, clean fork server for policy processes.

The server is a fresh interpreter that imports NumPy and the worker code and
then only forks: it never holds Episode seeds, Environments or any other
Host-private state, so a forked policy cannot read them from memory. Forking a
warm process costs milliseconds where a new interpreter costs tens.

Clients (the Host's Episode runners) connect over a Unix SEQPACKET socket in a
private directory and send ``spawn`` requests carrying two descriptors (the
Episode socket and the output pipe). The server replies ``spawned`` with the
pid, reaps children, and reports ``exited`` with the raw wait status to the
connection that spawned them. ``kill`` requests go through the server because
only the parent knows whether a pid is still its own (no pid-reuse races).
A connection that closes takes its children with it.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import msgspec

from evopolicygym.evaluation.environment import POLICY_ENVIRONMENT
from evopolicygym.hostdirs import host_base

if TYPE_CHECKING:
    from evopolicygym.evaluation.cgroups import CgroupPool

__all__ = ["ForkServer", "ForkServerClient", "ForkServerError"]

T = TypeVar("T")


def _spawn(start: Callable[[], T]) -> T:
    # Imported here: the server and runner children import this module and need none of it.
    from evopolicygym.evaluation.spawner import spawn

    return spawn(start)


_MAX_MESSAGE = 64 * 1024


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering; a Host fault."""


# --------------------------------------------------------------------------- server


def _from_host(conn: socket.socket, host_pid: int, proc_fd: int) -> bool:
    """Whether the peer is the Host or one of its runners (its children), by SO_PEERCRED:
    same user, and the Host's pid or its child's. Every policy is a descendant of this
    server, so none passes; where we serve from a PID namespace of our own, the Host and
    its runners are outside it and show as pid 0, which no policy inside can."""
    try:
        pid, uid, _gid = struct.unpack(
            "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        )
    except OSError:
        return False
    if uid != os.geteuid():
        return False
    if host_pid == 0:
        return pid == 0
    if pid == host_pid:
        return True
    try:
        fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=proc_fd)  # /proc, held from before the seal
        try:
            stat = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return False
    return int(stat[stat.rindex(b")") + 2 :].split()[1]) == host_pid


def _serve(listener: socket.socket, ready_fd: int, root: str, work_dir: str, host_pid: int) -> None:
    global _starting_fd
    import gc
    import importlib.util  # noqa: F401  (used by every policy: import it once, here)
    import traceback  # noqa: F401

    import numpy.random  # noqa: F401  (lazy in NumPy 2; ~5 ms if each policy paid it)

    from evopolicygym import namespaces
    from evopolicygym.evaluation import cgroups, sandbox, seccomp, worker

    namespaces.die_with_parent(host_pid)
    _serve_from_own_pid_namespace(listener, ready_fd)
    # As our children see us (for their die-with-parent check), and as the Host sees us:
    # /proc belongs to the Host's PID namespace, so /proc/self names our pid there.
    server_pid = os.getpid()
    host_visible_pid = int(os.readlink("/proc/self"))
    # The Host's pid as we see it; 0: outside our PID namespace.
    host_visible_parent = host_pid if server_pid == host_visible_pid else 0
    # To tell the Host's runners by their parent once /proc is sealed away. Policies never
    # inherit it: the worker closes every descriptor above the Episode's before the jail.
    proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    containment = sandbox.probe_containment()
    filtered = seccomp.probe()
    if filtered:
        seccomp.prepare()  # built here once, inherited by every policy
    # Before sealing: the pool keeps descriptors of its cgroup directories, which the
    # sealed root does not show.
    pool = cgroups.CgroupPool.create(host_visible_pid)
    enforced = [
        "rlimits",
        *(["seccomp"] if filtered else []),
        *(f"cgroup-{c}" for c in (pool.controllers if pool else ())),
    ]
    worker.prepare_fork_server()
    # Everything imported so far is shared copy-on-write with every child; keep the
    # collector from walking (and so copying) those pages after each fork.
    gc.collect()
    gc.freeze()
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    if containment == "namespaces":
        sandbox.seal_fork_server(root, work_dir, sandbox.runtime_paths())
    server = _Server(
        listener,
        work_dir,
        server_pid=server_pid,
        host_visible_parent=host_visible_parent,
        proc_fd=proc_fd,
        own_pidns=own_pidns,
        containment=containment,
        filtered=filtered,
        pool=pool,
    )
    ready = {
        "containment": containment,
        "pid": host_visible_pid,
        "enforced": enforced,
        "cgroup": pool.path if pool else None,
    }
    os.write(ready_fd, msgspec.msgpack.encode(ready))
    os.close(ready_fd)
    _starting_fd = None
    server.serve()


def _serve_from_own_pid_namespace(listener: socket.socket, ready_fd: int) -> None:
    """Without root, in a user namespace of our own: carry on in a child that leads a PID
    namespace of its own, this process only waiting for it and exiting as it does."""
    from evopolicygym import namespaces
    from evopolicygym.evaluation import sandbox

    if (
        os.geteuid() == 0
        or namespaces.containment_disabled()
        or not namespaces.enter_user_namespace()
    ):
        return
    # Our PID namespace belongs to the initial user namespace, where we hold no
    # capability, so we could never setns() back into it after making a policy's.
    # Serve from a PID namespace of our own instead; this process only waits.
    try:
        sandbox.enter_pid_namespace()
        pid = os.fork()
    except OSError:
        pid = 0  # carry on here; the probe will settle for process groups
    if pid > 0:
        listener.close()
        os.close(ready_fd)
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    namespaces.die_with_parent(None)


def _reply(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.send(msgspec.msgpack.encode(message))


class _Server:
    """The serving loop: accepts the Host's connections, forks a policy for each ``spawn``,
    reaps them and reports their exits to the connection that spawned them."""

    def __init__(
        self,
        listener: socket.socket,
        work_dir: str,
        *,
        server_pid: int,
        host_visible_parent: int,
        proc_fd: int,
        own_pidns: int,
        containment: str,
        filtered: bool,
        pool: CgroupPool | None,
    ) -> None:
        self.listener = listener
        self.work_dir = work_dir
        self.server_pid = server_pid
        self.host_visible_parent = host_visible_parent
        self.proc_fd = proc_fd
        self.own_pidns = own_pidns
        self.containment = containment
        self.filtered = filtered
        self.pool = pool
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the Host decides when we stop
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        self.owners: dict[int, socket.socket] = {}
        self.stopped: dict[int, int] = {}  # traced children stopped by a signal: their status
        self.serial = 0
        self.children: dict[socket.socket, set[int]] = {}
        self.leaves: dict[int, str] = {}  # policy pid -> its cgroup leaf

    def serve(self) -> None:
        """Until a ``shutdown`` request; every policy left is killed on the way out."""
        try:
            while True:
                for key, _ in self.selector.select():
                    if key.data == "accept":
                        self.accept()
                    elif key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            while os.read(self.wake_r, 4096):
                                pass
                        self.reap()
                    else:
                        conn = key.fileobj
                        assert isinstance(conn, socket.socket)
                        if not self.receive(conn):
                            return
        finally:
            if self.pool:
                self.reap()
                self.pool.close()  # every leaf killed and removed, then the group

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        if not _from_host(conn, self.host_visible_parent, self.proc_fd):
            conn.close()  # a policy (or anyone else) that found the socket
            return
        self.children[conn] = set()
        self.selector.register(conn, selectors.EVENT_READ, "conn")

    def receive(self, conn: socket.socket) -> bool:
        """Handle one request from ``conn``; False when it is ``shutdown``."""
        try:
            data, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            self.selector.unregister(conn)
            for pid in self.children.pop(conn, set()):
                self.kill(pid)
            conn.close()
            return True
        message = msgspec.msgpack.decode(data)
        op = message.get("op")
        if op == "spawn":
            self.spawn(conn, message, fds)
        elif op == "kill":
            for fd in fds:
                os.close(fd)
            pid = message.get("pid")
            if pid in self.owners and self.owners[pid] is conn:
                self.kill(pid)
        elif op == "shutdown":
            for pids in self.children.values():
                for pid in pids:
                    self.kill(pid)
            return False
        return True

    def kill(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        if self.pool and pid in self.leaves:
            self.pool.kill(self.leaves[pid])  # children that left the process group too

    def reap(self) -> None:
        pool = self.pool
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFSTOPPED(status):
                # A policy that made us its tracer (PTRACE_TRACEME) is stopped, not ended, by
                # a signal: end it, and report that stop (the policy's doing) once it is gone.
                self.stopped[pid] = status
                self.kill(pid)
                continue
            # Whatever the leader left in its group goes too (the process-group level).
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            if pool:
                if pid in self.leaves:
                    pool.release(self.leaves.pop(pid))
                pool.retry()
            status = self.stopped.pop(pid, status)
            conn = self.owners.pop(pid, None)
            if conn is not None:
                self.children.get(conn, set()).discard(pid)
                _reply(conn, {"op": "exited", "pid": pid, "status": status})

    def spawn(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        from evopolicygym.evaluation import cgroups, sandbox

        pool = self.pool
        self.serial += 1
        leaf = f"e{self.serial}"
        cgroup_fd: int | None = None
        try:
            if len(fds) != 2:
                raise ForkServerError("spawn needs exactly two descriptors")
            if pool:
                limits = msgspec.convert(request["limits"], sandbox.ResourceLimits)
                memory = cgroups.memory_bytes(limits.memory_mb, limits.scratch_mb)
                cgroup_fd = pool.prepare(leaf, memory, limits.max_processes)
            if self.containment == "namespaces":
                sandbox.enter_pid_namespace()
            pid = os.fork()
            if pid == 0:
                self._child(request, fds, cgroup_fd)
            if self.containment == "namespaces":
                sandbox.leave_pid_namespace(self.own_pidns)
            self.owners[pid] = conn
            self.children[conn].add(pid)
            if pool:
                self.leaves[pid] = leaf
            _reply(conn, {"op": "spawned", "id": request.get("id"), "pid": pid})
        except Exception as exc:
            if pool:
                pool.release(leaf)
            _reply(
                conn,
                {"op": "error", "id": request.get("id"), "message": f"{type(exc).__name__}: {exc}"},
            )
        finally:
            for fd in fds:
                os.close(fd)
            if cgroup_fd is not None:
                os.close(cgroup_fd)

    def _child(self, request: dict[str, Any], fds: list[int], cgroup_fd: int | None) -> NoReturn:
        """In the forked policy process: shed the server's descriptors and become the policy."""
        from evopolicygym.evaluation import sandbox, worker

        try:
            self.listener.close()
            for other in self.children:
                other.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            request["containment"] = self.containment
            request["work_dir"] = self.work_dir
            request["server_pid"] = self.server_pid
            request["uid"] = sandbox.jail_uid(self.server_pid, self.serial)
            request["cgroup_fd"] = cgroup_fd
            request["seccomp"] = self.filtered
            worker.child_main(request, fds[0], fds[1])
        finally:
            os._exit(71)


# The ready pipe while the server starts: the Host reads it until it has heard from us.
_starting_fd: int | None = None


def _abandoned() -> bool:
    """Whether the Host stopped waiting for this server to start: it closes its end of the
    ready pipe when interrupted (and may already be removing our directory)."""
    if _starting_fd is None:
        return False
    poller = select.poll()
    poller.register(_starting_fd, 0)  # a write end reports POLLERR once no reader is left
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def main() -> None:
    global _starting_fd
    listener = socket.socket(fileno=int(sys.argv[1]))
    _starting_fd = int(sys.argv[2])
    try:
        _serve(listener, _starting_fd, sys.argv[3], sys.argv[4], int(sys.argv[5]))
    except BaseException:
        if _abandoned():
            os._exit(1)  # what failed has no reader: the Host is gone or going
        raise


# --------------------------------------------------------------------------- host side


_DIR_PREFIX = "f"
_MAX_SOCKET_PATH = 107  # AF_UNIX's sun_path, less its terminating NUL


class ForkServer:
    """Owns one fork server process. Use as a context manager, or call ``close``."""

    def __init__(self) -> None:
        # In the Host's private directory (gone with it, hidden from the Agent); short, for
        # the socket path's sake.
        self._dir = tempfile.mkdtemp(prefix=_DIR_PREFIX, dir=host_base())
        self.address = os.path.join(self._dir, "sock")
        if len(os.fsencode(self.address)) > _MAX_SOCKET_PATH:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise ForkServerError(
                f"the fork server's socket path {self.address} is over {_MAX_SOCKET_PATH} bytes: "
                "set TMPDIR to a shorter directory"
            )
        # Evaluations materialize programs and scratch directories under work_dir: the
        # only part of the Host's filesystem a sealed fork server (and so a policy) can reach.
        self.work_dir = os.path.join(self._dir, "work")
        root = os.path.join(self._dir, "root")
        os.mkdir(self.work_dir, 0o700)
        os.mkdir(root, 0o700)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.address)
        os.chmod(self.address, 0o600)
        listener.listen(64)
        ready_r, ready_w = os.pipe()
        # Built from nothing, not from os.environ: the strings a process is started with
        # stay in its memory, and every policy is a copy of this process.
        env = dict(POLICY_ENVIRONMENT)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # Policies inherit the server's hash secret: fix it so str-set order is reproducible.
        env["PYTHONHASHSEED"] = "0"
        # Only what locates the package (a source checkout run without installing it)
        # and the containment override.
        for name in ("PYTHONPATH", "EVOPOLICY_CONTAINMENT"):
            if name in os.environ:
                env[name] = os.environ[name]
        try:
            self._process = _spawn(
                lambda: subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from evopolicygym.evaluation.forkserver import main; main()",
                        str(listener.fileno()),
                        str(ready_w),
                        root,
                        self.work_dir,
                        str(os.getpid()),
                    ],
                    pass_fds=(listener.fileno(), ready_w),
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            )
        except BaseException:
            # Interrupted: a server the spawner thread still starts finds nobody waiting.
            os.close(ready_r)
            os.close(ready_w)
            listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        listener.close()
        os.close(ready_w)
        # One read, not read-to-end: a server that re-parents itself keeps a copy open.
        try:
            data = os.read(ready_r, 4096)
        except BaseException:
            # Interrupted (Ctrl-C) while the server starts: stop it before its directory goes.
            self._process.kill()
            self._process.wait()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        finally:
            os.close(ready_r)
        if not data:
            self._process.wait()
            raise ForkServerError(
                f"policy fork server failed to start (exit code {self._process.returncode})"
            )
        ready = msgspec.msgpack.decode(data)
        self.containment: str = ready["containment"]
        # The limits that hold for every policy of this server ("rlimits", "seccomp",
        # "cgroup-cpu", "cgroup-memory", "cgroup-pids"), and its cgroup v2 group, if any.
        self.enforced: tuple[str, ...] = tuple(ready.get("enforced", ()))
        self.cgroup: str | None = ready.get("cgroup")
        # The serving process: the one started, or its child when it re-parents itself
        # into a PID namespace of its own (no root); policy processes are its children.
        self.server_pid: int = ready["pid"]
        self._closed = False

    def connect(self) -> ForkServerClient:
        return ForkServerClient(self.address)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError), self.connect() as client:
            client.shutdown()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ForkServerClient:
    """One connection to the fork server; not thread-safe (one per Episode runner)."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(address)
        self._exits: dict[int, int] = {}
        self._replies: dict[Any, dict[str, Any]] = {}
        self._next_id = 0

    def _recv(self, timeout: float | None) -> dict[str, Any] | None:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(_MAX_MESSAGE)
        except (TimeoutError, BlockingIOError):
            return None
        if not data:
            raise ForkServerError("policy fork server closed the connection")
        message: dict[str, Any] = msgspec.msgpack.decode(data)
        if message.get("op") == "exited":
            self._exits[message["pid"]] = message["status"]
        else:
            self._replies[message.get("id")] = message
        return message

    def request_spawn(self, request: dict[str, Any], episode_fd: int, output_fd: int) -> int:
        """Ask for a policy process without waiting; returns the request id for ``spawned``."""
        self._next_id += 1
        request = {**request, "op": "spawn", "id": self._next_id}
        socket.send_fds(self.sock, [msgspec.msgpack.encode(request)], [episode_fd, output_fd])
        return self._next_id

    def spawned(self, request_id: int, timeout: float = 30.0) -> int:
        """The pid of a requested policy process."""
        import time

        deadline = time.monotonic() + timeout
        while request_id not in self._replies:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._recv(remaining) is None:
                raise ForkServerError("policy fork server did not answer a spawn request")
        message = self._replies.pop(request_id)
        if message["op"] == "error":
            raise ForkServerError(f"policy fork server could not spawn: {message['message']}")
        return int(message["pid"])

    def spawn(self, request: dict[str, Any], episode_fd: int, output_fd: int) -> int:
        return self.spawned(self.request_spawn(request, episode_fd, output_fd))

    def kill(self, pid: int) -> None:
        self.sock.send(msgspec.msgpack.encode({"op": "kill", "pid": pid}))

    def wait(self, pid: int, timeout: float) -> int | None:
        """The raw wait status of ``pid`` once it has exited, or None after ``timeout``."""
        import time

        deadline = time.monotonic() + timeout
        while pid not in self._exits:
            # A zero timeout still reads what has already arrived.
            if self._recv(max(0.0, deadline - time.monotonic())) is None:
                return None
        return self._exits.pop(pid)

    def shutdown(self) -> None:
        self.sock.send(msgspec.msgpack.encode({"op": "shutdown"}))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> ForkServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    main()
