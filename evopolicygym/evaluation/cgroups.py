"""A cgroup v2 group per policy process: one core of CPU, bounded memory and task count.

The fork server makes one group of its own, ``evopolicy-<pid>-<random>``, under the
nearest cgroup of its own hierarchy (itself or an ancestor) that already hands the
``cpu``, ``memory`` and ``pids`` controllers down and where it may create one. Each
policy process gets a leaf in it before any of its code runs, so its threads and
every process it starts are counted together:

- ``cpu.max`` one core (100 ms per 100 ms): however many threads or children, one
  core's worth of CPU at most;
- ``memory.max`` the memory limit plus the scratch size (tmpfs pages are charged to
  the writer) plus headroom for the copies a fork makes, with no swap; ``memory.oom.group``
  kills the whole leaf when it is reached;
- ``pids.max`` the process limit (threads included).

A leaf is killed whole (``cgroup.kill``) when its policy ends, which also catches
children that left the policy's process group, and removed once empty. Everything
goes through directory descriptors opened before the fork server seals itself
into its minimal root, where ``/sys`` is not mounted.

Where no such cgroup can be made (cgroup v1 or a hybrid hierarchy without these
controllers in v2, a read-only ``/sys/fs/cgroup``, a non-root user without a
delegated subtree, a container whose cgroup holds processes), the pool is None and
the per-process rlimits, CPU pinning and the syscall filter are what bound a policy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time

__all__ = ["CONTROLLERS", "CgroupPool", "find_parent", "memory_bytes", "sweep_stale"]

CONTROLLERS = ("cpu", "memory", "pids")
_PREFIX = "evopolicy-"
_PERIOD_US = 100_000
_MEMORY_HEADROOM_MB = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _cgroup2_mount(mountinfo: str) -> str | None:
    """Where the cgroup v2 hierarchy is mounted (its root as this process sees it)."""
    found = None
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, kind = left.split(), right.split()
        # Prefer the usual place; a hybrid system mounts it at /sys/fs/cgroup/unified.
        usual = found is None or (len(fields) >= 5 and fields[4] == "/sys/fs/cgroup")
        if kind and kind[0] == "cgroup2" and len(fields) >= 5 and fields[3] == "/" and usual:
            found = fields[4]
    return found


def _own_path(proc_cgroup: str) -> str | None:
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def find_parent(
    mountinfo: str | None = None, proc_cgroup: str | None = None
) -> tuple[str, tuple[str, ...]] | None:
    """The nearest cgroup (this process's own or an ancestor) whose ``cgroup.subtree_control``
    already enables the controllers we use, with those of CONTROLLERS it enables; None when
    there is no cgroup v2 hierarchy or no cgroup on the way up hands any of them down."""
    try:
        mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
        proc_cgroup = _read("/proc/self/cgroup") if proc_cgroup is None else proc_cgroup
    except OSError:
        return None
    mount = _cgroup2_mount(mountinfo)
    own = _own_path(proc_cgroup)
    if mount is None or own is None or own.startswith("/.."):  # outside our cgroup namespace
        return None
    path = own
    while True:
        directory = os.path.normpath(mount + "/" + path.strip("/"))
        try:
            enabled = set(_read(os.path.join(directory, "cgroup.subtree_control")).split())
        except OSError:
            enabled = set()
        held = tuple(c for c in CONTROLLERS if c in enabled)
        if "cpu" in held and os.access(directory, os.W_OK):
            return directory, held
        if path == "/":
            return None
        path = os.path.dirname(path.rstrip("/")) or "/"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale(parent: str) -> None:
    """Remove the empty groups of fork servers that are gone (a SIGKILLed Host's server
    cannot remove its own). Only empty ones can be removed: nothing is killed here."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            owner = name[len(_PREFIX) :].split("-", 1)[0]
            if not name.startswith(_PREFIX) or not owner.isdigit() or _alive(int(owner)):
                continue
            group = os.path.join(parent, name)
            with contextlib.suppress(OSError):
                for leaf in os.listdir(group):
                    if os.path.isdir(os.path.join(group, leaf)):
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(group, leaf))
                os.rmdir(group)


class CgroupPool:
    """The fork server's group and the leaves of its live policy processes."""

    def __init__(self, path: str, parent_fd: int, fd: int, controllers: tuple[str, ...]) -> None:
        self.path = path  # as the Host sees it; the fork server uses the descriptors
        self.parent_fd = parent_fd
        self.fd = fd
        self.controllers = controllers
        self.leaves: set[str] = set()
        self.pending: set[str] = set()  # killed, not yet empty enough to remove

    @classmethod
    def create(
        cls, owner_pid: int, parent: tuple[str, tuple[str, ...]] | None = None
    ) -> CgroupPool | None:
        """Make the group under the nearest usable cgroup; None where that is not possible."""
        found = find_parent() if parent is None else parent
        if found is None:
            return None
        directory, offered = found
        sweep_stale(directory)
        path = os.path.join(directory, f"{_PREFIX}{owner_pid}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path, 0o755)
        except OSError:
            return None
        held = []
        for controller in offered:
            try:
                _write_at(None, os.path.join(path, "cgroup.subtree_control"), f"+{controller}")
                held.append(controller)
            except OSError:
                continue
        if "cpu" not in held:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None
        return cls(path, os.open(directory, _DIR_FLAGS), os.open(path, _DIR_FLAGS), tuple(held))

    def prepare(self, name: str, memory_bytes: int, max_tasks: int) -> int:
        """Make leaf ``name`` with its limits; returns a descriptor of its ``cgroup.procs``:
        the policy process writes "0" to it (itself) before anything else."""
        os.mkdir(name, 0o755, dir_fd=self.fd)
        self.leaves.add(name)
        try:
            if "cpu" in self.controllers:
                _write_at(self.fd, f"{name}/cpu.max", f"{_PERIOD_US} {_PERIOD_US}")
            if "memory" in self.controllers:
                _write_at(self.fd, f"{name}/memory.max", str(memory_bytes))
                for optional, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    with contextlib.suppress(OSError):
                        _write_at(self.fd, f"{name}/{optional}", value)
            if "pids" in self.controllers:
                _write_at(self.fd, f"{name}/pids.max", str(max_tasks))
            return os.open(f"{name}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            self.release(name)
            raise

    def kill(self, name: str) -> None:
        """Kill every process in the leaf (kernel 5.14+; older ones rely on the PID namespace)."""
        with contextlib.suppress(OSError):
            _write_at(self.fd, f"{name}/cgroup.kill", "1")

    def release(self, name: str) -> None:
        """Kill what is left in the leaf and remove it, now or on a later ``retry``."""
        if name not in self.leaves:
            return
        self.kill(name)
        self.pending.add(name)
        self.retry()

    def retry(self) -> None:
        for name in list(self.pending):
            try:
                os.rmdir(name, dir_fd=self.fd)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    continue
            self.pending.discard(name)
            self.leaves.discard(name)

    def close(self, wait_s: float = 1.0) -> None:
        """Kill and remove every leaf, then the group (what stays busy is swept later)."""
        for name in list(self.leaves):
            self.release(name)
        deadline = time.monotonic() + wait_s
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.01)
            self.retry()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.basename(self.path), dir_fd=self.parent_fd)
        for fd in (self.fd, self.parent_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_at(dir_fd: int | None, path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def memory_bytes(memory_mb: int, scratch_mb: int) -> int:
    """A leaf's ``memory.max``: what rlimits allow one process above the warm interpreter,
    plus the scratch tmpfs, plus headroom for page copies after fork."""
    return (memory_mb + scratch_mb + _MEMORY_HEADROOM_MB) * 1024 * 1024
