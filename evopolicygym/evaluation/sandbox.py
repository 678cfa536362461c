"""Containment of policy processes: namespaces, read-only program, resource limits.

Linux only. What is available depends on privileges, so the fork server probes
once and records the level it got:

- ``namespaces``: each policy is PID 1 of a fresh PID namespace, so killing it
  kills every process it started (a fork bomb cannot outlive its Episode), and
  its program directory is mounted read-only in a private mount namespace, so
  it cannot leave state behind for the next Episode.
- ``process-group``: the policy leads its own process group, which the Host
  kills; ``RLIMIT_NPROC`` bounds forks for non-root users.

Resource limits apply at every level.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from typing import Literal

import msgspec

__all__ = ["Containment", "ResourceLimits", "apply_limits", "enter_pid_namespace", "leave_pid_namespace", "probe_containment", "protect_program_dir"]

Containment = Literal["namespaces", "process-group"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class ResourceLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-policy-process limits. ``memory_mb`` is address space beyond the pre-warmed interpreter."""

    memory_mb: int = 1024
    cpu_seconds: int | None = None  # None: the Episode deadline rounded up, plus one second
    max_processes: int = 64
    max_open_files: int = 256
    max_file_mb: int = 64


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _mount(source: str | None, target: str, flags: int) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None, target.encode(), None, ctypes.c_ulong(flags), None
        ),
        f"mount {target}",
    )


def enter_pid_namespace() -> None:
    """Make the next forked child PID 1 of a new PID namespace (the caller's own PID is unchanged)."""
    unshare(CLONE_NEWPID)


def leave_pid_namespace(own_namespace_fd: int) -> None:
    """Point future children back at the caller's own PID namespace."""
    _check(_libc.setns(own_namespace_fd, CLONE_NEWPID), "setns")  # os.setns is 3.12+


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def probe_containment() -> Containment:
    """Called once in the (single-threaded) fork server: get the strongest level available.

    ``EVOPOLICY_CONTAINMENT=process-group`` forces the weaker level (for comparison or
    where namespaces misbehave).
    """
    if os.environ.get("EVOPOLICY_CONTAINMENT") == "process-group":
        return "process-group"
    if os.geteuid() != 0:
        # An unprivileged user namespace gives us the capabilities for the rest;
        # it must happen before any thread exists, which is why the fork server does it.
        uid, gid = os.geteuid(), os.getegid()
        try:
            unshare(CLONE_NEWUSER)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError:
            return "process-group"
    try:
        own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return "process-group"
    try:
        enter_pid_namespace()
        pid = os.fork()
        if pid == 0:
            try:
                unshare(CLONE_NEWNS)
                _mount(None, "/", MS_REC | MS_PRIVATE)
                os._exit(0 if os.getpid() == 1 else 3)
            except BaseException:
                os._exit(4)
        leave_pid_namespace(own)
        _, status = os.waitpid(pid, 0)
        return "namespaces" if os.waitstatus_to_exitcode(status) == 0 else "process-group"
    except OSError:
        return "process-group"
    finally:
        os.close(own)


def protect_program_dir(program_dir: str) -> None:
    """In a private mount namespace, bind the program directory read-only onto itself."""
    unshare(CLONE_NEWNS)
    _mount(None, "/", MS_REC | MS_PRIVATE)
    _mount(program_dir, program_dir, MS_BIND | MS_REC)
    _mount(None, program_dir, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _address_space_in_use() -> int:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def apply_limits(limits: ResourceLimits, cpu_seconds: int) -> None:
    """Set rlimits on the calling (policy) process; soft == hard so a policy cannot raise them."""

    def both(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    both(resource.RLIMIT_CORE, 0)
    both(resource.RLIMIT_AS, _address_space_in_use() + limits.memory_mb * 1024 * 1024)
    # SIGXCPU at the soft limit is what we classify; the hard limit is the backstop.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    both(resource.RLIMIT_NPROC, limits.max_processes)
    both(resource.RLIMIT_NOFILE, limits.max_open_files)
    both(resource.RLIMIT_FSIZE, limits.max_file_mb * 1024 * 1024)
