"""Linux namespace and mount primitives through libc, shared by the policy sandbox and the
Agent jail.

A leaf (standard library only): ``evaluation.sandbox`` builds the policy's jail from
these and ``agents.jail`` the Agent's, without either importing the other.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

__all__ = [
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CONTAINMENT_ENV",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "check",
    "containment_disabled",
    "die_with_parent",
    "enter_user_namespace",
    "libc",
    "mount",
    "mount_fs",
    "unshare",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

# `process-group` turns namespaces off for policies and the Agent alike (a test override,
# and the way out on a machine where they misbehave).
CONTAINMENT_ENV = "EVOPOLICY_CONTAINMENT"

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def check(ret: int, what: str) -> None:
    """Raise OSError with errno's message when a libc call returned non-zero."""
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, flags: int) -> None:
    """mount(2) without a filesystem type: binds, remounts and propagation changes."""
    check(
        libc.mount(
            source.encode() if source else None, target.encode(), None, ctypes.c_ulong(flags), None
        ),
        f"mount {target}",
    )


def mount_fs(fstype: str, target: str, flags: int, data: str = "") -> None:
    """A fresh filesystem of ``fstype`` (tmpfs, proc) on ``target``."""
    check(
        libc.mount(
            fstype.encode(),
            target.encode(),
            fstype.encode(),
            ctypes.c_ulong(flags),
            data.encode() or None,
        ),
        f"mount {fstype} on {target}",
    )


def containment_disabled() -> bool:
    return os.environ.get(CONTAINMENT_ENV) == "process-group"


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_user_namespace() -> bool:
    """Without root: an unprivileged user namespace (mapping only our own uid and gid) gives
    the capabilities the rest needs. Must run before any thread exists."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        unshare(CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        return False
    return True


_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None) -> None:
    """Be killed when the parent dies (a SIGKILLed Host must not leave servers or policies).

    ``expected_parent`` closes the race where the parent died before the prctl; PID 1 of
    a namespace cannot see its parent's pid (getppid() is 0), so it passes None.
    """
    check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
