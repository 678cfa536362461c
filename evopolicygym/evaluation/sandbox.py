"""Containment of policy processes: namespaces, read-only program, resource limits.

Linux only. What is available depends on privileges, so the fork server probes
once and records the level it got:

- ``namespaces``: each policy is PID 1 of a fresh PID namespace, so killing it
  kills every process it started (a fork bomb cannot outlive its Episode); it
  sees a read-only root holding only the Python runtime, its program at
  ``/program`` (read-only) and its scratch directory at ``/scratch``; it has no
  network; and it runs as ``nobody`` (or without capabilities) with
  ``no_new_privs``. It cannot read the Host's files or leave state behind.
- ``process-group``: the policy leads its own process group, which the Host
  kills; ``RLIMIT_NPROC`` bounds forks for non-root users.

Resource limits apply at every level.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import resource
import shutil
import sys
import tempfile
from typing import Literal

import msgspec

from evopolicygym.evaluation.environment import PROGRAM_MOUNT, SCRATCH_MOUNT
from evopolicygym.namespaces import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    check,
    containment_disabled,
    libc,
    mount,
    mount_fs,
    unshare,
)

__all__ = [
    "Containment",
    "ResourceLimits",
    "apply_limits",
    "drop_privileges",
    "enter_episode_jail",
    "enter_pid_namespace",
    "jail_uid",
    "leave_pid_namespace",
    "probe_containment",
    "runtime_paths",
    "seal_fork_server",
]

Containment = Literal["namespaces", "process-group"]


class ResourceLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-policy-process limits. ``memory_mb`` is address space beyond the pre-warmed
    interpreter."""

    memory_mb: int = 1024
    cpu_seconds: int | None = None  # None: the Episode deadline rounded up, plus two seconds
    max_processes: int = 64
    max_open_files: int = 256
    max_file_mb: int = 64
    scratch_mb: int = 64  # the size of /scratch under namespaces containment

    def __post_init__(self) -> None:
        for name in ("memory_mb", "max_processes", "max_open_files", "max_file_mb", "scratch_mb"):
            value = getattr(self, name)
            if not 1 <= value <= 1 << 20:
                raise ValueError(f"{name} must be between 1 and {1 << 20}, got {value}")
        if self.cpu_seconds is not None and not 1 <= self.cpu_seconds <= 86_400:
            raise ValueError(f"cpu_seconds must be between 1 and 86400, got {self.cpu_seconds}")


def enter_pid_namespace() -> None:
    """Make the next forked child PID 1 of a new PID namespace (the caller's own PID is
    unchanged)."""
    unshare(CLONE_NEWPID)


def leave_pid_namespace(own_namespace_fd: int) -> None:
    """Point future children back at the caller's own PID namespace."""
    check(libc.setns(own_namespace_fd, CLONE_NEWPID), "setns")  # os.setns is 3.12+


def probe_containment() -> Containment:
    """Called once in the (single-threaded) fork server: the strongest level that works here.

    The probe is a full dry run (PID namespace, seal, jail, privilege drop) inside a
    throwaway child, so a failure part-way leaves the server itself untouched.
    ``EVOPOLICY_CONTAINMENT=process-group`` forces the weaker level.
    """
    if containment_disabled():
        return "process-group"
    try:
        pid = os.fork()
    except OSError:
        return "process-group"
    if pid == 0:
        try:
            os._exit(0 if _dry_run() else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    return "namespaces" if os.waitstatus_to_exitcode(status) == 0 else "process-group"


def _dry_run() -> bool:
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    probe = tempfile.mkdtemp(prefix="evopolicy-probe-")
    try:
        for sub in ("root", "work", "work/program"):
            os.mkdir(os.path.join(probe, sub))
        enter_pid_namespace()
        pid = os.fork()
        if pid == 0:
            try:
                work = os.path.join(probe, "work")
                seal_fork_server(os.path.join(probe, "root"), work, runtime_paths())
                enter_episode_jail(os.path.join(work, "program"), work, 1, jail_uid(1, 0))
                drop_privileges(jail_uid(1, 0))
                with open(os.path.join(SCRATCH_MOUNT, "probe"), "w") as handle:
                    handle.write("writable")
                processes = sorted(p for p in os.listdir("/proc") if p.isdigit())
                hidden = not os.listdir(work) and processes == ["1"]
                os._exit(0 if hidden and os.getpid() == 1 else 3)
            except BaseException:
                os._exit(4)
        leave_pid_namespace(own)  # the step that fails where we lack the capability
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(own)
        shutil.rmtree(probe, ignore_errors=True)


_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
_MNT_DETACH = 2
_PR_SET_NO_NEW_PRIVS = 38
JAIL_UID_BASE = 3_000_000
JAIL_UID_SPAN = 1_000_000
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "passwd", "group", "nsswitch.conf")
_DEVICES = ("null", "zero", "random", "urandom")


def runtime_paths() -> list[str]:
    """Directories a policy needs to run Python: the interpreter's and the environment's prefixes.

    Deliberately not ``sys.path`` at large: it may name a project checkout that holds a store.
    """
    roots = {
        os.path.realpath(p)
        for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    ordered = sorted(r for r in roots if os.path.isdir(r) and not r.startswith(_SYSTEM_DIRS))
    # Bind outer directories only.
    return [
        r for r in ordered if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in ordered)
    ]


# statvfs f_flag bits that are also mount flags; in a user namespace a remount must
# repeat the ones the original mount has ("locked" flags), or it is refused.
_KEPT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: 0x400,
    os.ST_NODIRATIME: 0x800,
    os.ST_RELATIME: 0x200000,
}


def _bind(source: str, target: str, *, readonly: bool, device: bool = False) -> None:
    mount(source, target, MS_BIND | MS_REC)
    if readonly:
        current = os.statvfs(source).f_flag
        kept = 0
        for bit, flag in _KEPT_FLAGS.items():
            if current & bit:
                kept |= flag
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV) | kept
        mount(None, target, flags)


def seal_fork_server(root: str, work_dir: str, readable: list[str]) -> None:
    """Move the (single-threaded) fork server into its own network namespace and a minimal,
    read-only root: the runtime, a few devices and ``/etc`` files, and ``work_dir``, where the
    Host materializes programs and scratch directories. Done once, so each Episode's own
    jail costs a handful of mounts. ``root`` is an empty directory used as the mount point.
    """
    if _PIVOT_ROOT is None:
        raise OSError(f"pivot_root is not known on {platform.machine()}")
    # One empty network namespace (loopback down) for every policy: no network at all.
    unshare(CLONE_NEWNS | CLONE_NEWNET)
    mount(None, "/", MS_REC | MS_PRIVATE)
    mount_fs("tmpfs", root, MS_NOSUID | MS_NODEV, "mode=0755,size=4m")

    def inside(path: str) -> str:
        return root + path

    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), inside(path))
        elif os.path.isdir(path):
            os.makedirs(inside(path), exist_ok=True)
            _bind(path, inside(path), readonly=True)
    for path in readable:
        os.makedirs(inside(path), exist_ok=True)
        _bind(path, inside(path), readonly=True)
    os.makedirs(inside("/etc"), exist_ok=True)
    for name in _ETC_FILES:
        source = os.path.join("/etc", name)
        if os.path.isfile(source):
            open(inside(source), "w").close()
            _bind(source, inside(source), readonly=True)
    os.makedirs(inside("/dev"), exist_ok=True)
    for name in _DEVICES:
        source = os.path.join("/dev", name)
        open(inside(source), "w").close()
        _bind(source, inside(source), readonly=False, device=True)
    os.makedirs(inside(work_dir), exist_ok=True)
    _bind(work_dir, inside(work_dir), readonly=False)
    for mount_point in (PROGRAM_MOUNT, SCRATCH_MOUNT, "/proc"):
        os.makedirs(inside(mount_point), exist_ok=True)
    if os.geteuid() != 0:
        # In a user namespace the kernel lets a policy mount its own /proc only where a
        # proc mount is already fully visible; this one shows only our own PID namespace.
        mount_fs("proc", inside("/proc"), MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    os.mkdir(".old")
    check(libc.syscall(_PIVOT_ROOT, b".", b".old"), "pivot_root")
    check(libc.umount2(b"/.old", _MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    mount(None, "/", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/")


def enter_episode_jail(program_dir: str, work_dir: str, scratch_mb: int, uid: int) -> None:
    """In a policy process forked from a sealed fork server: see only this Episode's program
    (read-only, at /program), a fresh size-capped scratch directory (at /scratch) and its own
    processes; own network and IPC namespaces, so nothing (abstract sockets, SysV shared
    memory, message queues) is shared with any other Episode or the Host."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    _bind(program_dir, PROGRAM_MOUNT, readonly=True)
    owner = f",uid={uid},gid={uid}" if os.geteuid() == 0 else ""
    mount_fs("tmpfs", SCRATCH_MOUNT, MS_NOSUID | MS_NODEV, f"mode=0700,size={scratch_mb}m{owner}")
    mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # Hide every other Episode's program and scratch directory.
    check(libc.umount2(work_dir.encode(), _MNT_DETACH), "umount work directory")


def jail_uid(server_pid: int, serial: int) -> int:
    """A uid of its own for each live policy, so RLIMIT_NPROC (counted per uid) is per policy.

    Outside the usual account ranges; unique among a fork server's policies for a
    million spawns, and different fork servers start far apart.
    """
    return JAIL_UID_BASE + (server_pid * 7919 + serial) % JAIL_UID_SPAN


def drop_privileges(uid: int) -> None:
    """Root becomes ``uid`` (no groups, no capabilities); others shed every capability."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    else:
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()
        check(libc.capset(header, data), "capset")
    check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def _address_space_in_use() -> int:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def apply_limits(limits: ResourceLimits, cpu_seconds: int, own_uid: bool) -> None:
    """Set rlimits on the calling (policy) process; soft == hard so a policy cannot raise them."""

    def both(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    both(resource.RLIMIT_CORE, 0)
    both(resource.RLIMIT_AS, _address_space_in_use() + limits.memory_mb * 1024 * 1024)
    # SIGXCPU at the soft limit is what we classify; the hard limit is the backstop.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    # Counted per real uid: a policy with a uid of its own gets exactly max_processes; one
    # sharing the user's uid must leave room for the user's other processes.
    both(
        resource.RLIMIT_NPROC, limits.max_processes + (0 if own_uid else _processes_of(os.getuid()))
    )
    both(resource.RLIMIT_NOFILE, limits.max_open_files)
    both(resource.RLIMIT_FSIZE, limits.max_file_mb * 1024 * 1024)
