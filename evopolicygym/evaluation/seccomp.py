"""A syscall filter for policy processes: a small classic-BPF seccomp program.

Installed last in a policy process, after its jail and limits and just before any
policy code runs, with ``no_new_privs`` set. A denied system call fails with
``EPERM`` (the policy sees an ordinary ``PermissionError``); nothing is killed, so
a policy that tries one still plays its Episode. Denied:

- changing its CPU affinity (``sched_setaffinity``): a policy keeps the core it
  was pinned to, and so do its threads and children, which inherit it;
- making or entering namespaces and mounting (``unshare``, ``setns``, ``clone``
  with any ``CLONE_NEW*`` flag, ``mount``, ``umount2``, ``pivot_root``,
  ``chroot`` and the new mount API);
- inspecting or driving other processes (``ptrace``, ``process_vm_readv`` and
  ``_writev``, ``kcmp``, ``pidfd_getfd``);
- kernel facilities a policy has no use for: keyrings, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring``, ``open_by_handle_at``,
  ``syslog``, module and kexec loading.

``clone3`` answers ``ENOSYS``: its flags are behind a pointer a filter cannot read,
and the C library then falls back to ``clone``, whose flags it can.

The filter checks the architecture first: a system call made through another
ABI (32-bit ``int 0x80`` on x86_64, or x32) is denied whole — it fails closed.
Known here: x86_64 and aarch64; elsewhere no filter is installed and the
fork server does not report ``seccomp`` among the limits that hold.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
import threading

from evopolicygym.namespaces import check, libc

__all__ = ["DENIED", "available", "install", "number", "prepare", "probe"]

# Names in the order of the tables below, which hold each one's number per architecture.
DENIED = (
    "sched_setaffinity",
    "ptrace",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "syslog",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
)

# (audit architecture, clone, clone3, numbers of DENIED in order, first number of another ABI)
_ARCHES: dict[str, tuple[int, int, int, tuple[int, ...], int | None]] = {
    "x86_64": (
        0xC000003E,
        56,
        435,
        (
            203,
            101,
            272,
            308,
            165,
            166,
            155,
            161,
            428,
            429,
            430,
            431,
            432,
            433,
            442,
            310,
            311,
            312,
            438,
            250,
            248,
            249,
            321,
            298,
            323,
            425,
            426,
            427,
            304,
            103,
            175,
            313,
            176,
            246,
            320,
        ),
        0x40000000,  # __X32_SYSCALL_BIT: x32 calls share the x86_64 audit architecture
    ),
    "aarch64": (
        0xC00000B7,
        220,
        435,
        (
            122,
            117,
            97,
            268,
            40,
            39,
            41,
            51,
            428,
            429,
            430,
            431,
            432,
            433,
            442,
            270,
            271,
            272,
            438,
            219,
            217,
            218,
            280,
            241,
            282,
            425,
            426,
            427,
            265,
            116,
            105,
            273,
            106,
            104,
            294,
        ),
        None,
    ),
}

# Any flag that makes a new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET).
_CLONE_NEW_FLAGS = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data
_ARG0_LOW = 16 if sys.byteorder == "little" else 20
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump-if-true, jump-if-false, k); jumps name labels or are 0."""
    arch, clone, clone3, numbers, foreign_from = _ARCHES[machine]
    ops: list[tuple[int, int | str, int | str, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "deny", arch),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if foreign_from is not None:
        ops.append((_JGE, "deny", 0, foreign_from))
    ops.append((_JEQ, "clone", 0, clone))
    ops.append((_JEQ, "enosys", 0, clone3))
    ops.extend((_JEQ, "deny", 0, number) for number in numbers)
    ops.append((_RET, 0, 0, _ALLOW))
    labels = {"deny": len(ops), "enosys": len(ops) + 1, "clone": len(ops) + 2}
    ops.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    ops.append((_RET, 0, 0, _ERRNO | errno.ENOSYS))
    ops.append((_LD_W_ABS, 0, 0, _ARG0_LOW))  # clone: its flags (BPF jumps only forward)
    ops.append((_JSET, 1, 0, _CLONE_NEW_FLAGS))
    ops.append((_RET, 0, 0, _ALLOW))
    ops.append((_RET, 0, 0, _ERRNO | errno.EPERM))
    resolved = []
    for i, (code, jt, jf, k) in enumerate(ops):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        assert all(0 <= j <= 255 for j in jumps)
        resolved.append((code, jumps[0], jumps[1], k))
    return resolved


def number(name: str, machine: str | None = None) -> int:
    """The number of a denied system call (or ``clone``/``clone3``) on ``machine``."""
    _, clone, clone3, numbers, _ = _ARCHES[machine or platform.machine()]
    return {"clone": clone, "clone3": clone3, **dict(zip(DENIED, numbers, strict=True))}[name]


def available() -> bool:
    """Whether a filter is known for this machine's architecture."""
    return platform.machine() in _ARCHES


_prepared: _SockFprog | None = None


def prepare() -> _SockFprog:
    """The filter for this machine, built once: the fork server builds it before forking,
    so a policy process only hands the kernel what it inherited. Raises OSError where no
    filter is known for the architecture."""
    global _prepared
    if _prepared is None:
        machine = platform.machine()
        if machine not in _ARCHES:
            raise OSError(errno.ENOSYS, f"no syscall filter is known for {machine}")
        ops = _program(machine)
        filters = (_SockFilter * len(ops))(*(_SockFilter(*op) for op in ops))
        _prepared = _SockFprog(len(ops), filters)
    return _prepared


def install() -> None:
    """Set ``no_new_privs`` and install the filter on the calling (single-threaded) process.

    Irrevocable, and inherited by every thread and child it makes. Raises OSError when
    the kernel refuses it.
    """
    prog = prepare()
    unsigned = ctypes.c_ulong
    check(
        libc.prctl(_PR_SET_NO_NEW_PRIVS, unsigned(1), unsigned(0), unsigned(0), unsigned(0)),
        "prctl(NO_NEW_PRIVS)",
    )
    check(
        libc.prctl(
            _PR_SET_SECCOMP,
            unsigned(_SECCOMP_MODE_FILTER),
            ctypes.byref(prog),
            unsigned(0),
            unsigned(0),
        ),
        "prctl(SET_SECCOMP)",
    )


def probe() -> bool:
    """In a throwaway child: does the filter install here, and does it deny what it should
    while allowing threads and forks? Call from a single-threaded process."""
    if not available():
        return False
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:
        code = 3
        try:
            install()
            try:
                os.sched_setaffinity(0, os.sched_getaffinity(0))
            except PermissionError:
                code = 0
            thread = threading.Thread(target=os.getpid)  # clone3 refused, clone allowed
            thread.start()
            thread.join()
            child = os.fork()  # a plain fork (clone without CLONE_NEW*) still works
            if child == 0:
                os._exit(0)
            _, status = os.waitpid(child, 0)
            if status != 0:
                code = 4
        except BaseException:
            code = 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
