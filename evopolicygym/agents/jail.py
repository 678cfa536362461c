"""Run an Agent where it cannot reach the Host: its own user, mount and PID namespaces.

``python -I -S jail.py [--probe] [--allow-uncontained | --uncontained] [--hide DIR]...
[--read-only DIR]... [--writable DIR]... -- PROGRAM ARGS...``

The launcher runs this file as a script in a fresh interpreter without site-packages,
so it imports the standard library only: a user namespace can be entered only by a
process with one thread, and an import such as NumPy starts threads (OpenBLAS).

The Agent keeps the machine as its user sees it (tools, network, its workspace, its
home, the session socket), with these differences:

- it is an unprivileged user in a user namespace of its own (uid 1000 when the Host is
  root, else the Host's uid), with no capabilities and ``no_new_privs``: it cannot
  unmount what hides the Host's files, mount over them, or gain privileges by exec;
- every ``--hide`` directory (the store, the Host's private directory) is an empty
  tmpfs; the machine is read-only but for the ``--writable`` directories (its
  workspace, its configuration directories), its home and the temporary directories,
  and every ``--read-only`` directory (the Host's interpreter and code) is read-only
  even where it lies in those: nothing the Agent writes changes what the Host (or, for
  a root Host, anyone) runs next;
- ``/proc`` shows only its own processes, so the Host is neither readable through
  ``/proc/<pid>`` nor signalable, and ``/proc/sys`` is read-only; ``/dev`` holds only
  the usual character devices (null, zero, random, tty, ptys), not the disks.

Three processes: this one (the Host's child, which it waits on and signals), an init
(PID 1 of the new namespace, which reaps and forwards signals: PID 1 ignores signals
it has no handler for) and the Agent. Everything the Agent starts dies with the init.

Fails closed: when any of this cannot be set up it says why in one line and exits
126 without starting the Agent, unless ``--allow-uncontained`` (the Run's
``--allow-uncontained-agent``) lets it run the Agent as is. ``--uncontained`` runs the
Agent as is outright (containment turned off). ``--probe`` sets everything up and
exits 0 instead of starting a program: how the Host learns, before a Run starts,
whether its Agent can be contained here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import ModuleType

__all__ = ["AGENT_UID", "PROBE_OK", "UNCONTAINED_EXIT", "main"]

AGENT_UID = 1000  # the Agent's uid (and gid) in its namespace when the Host is root
UNCONTAINED_EXIT = 126  # containment failed and was not allowed to: the Agent never started
PROBE_OK = "jail: contained"

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_PR_SET_NO_NEW_PRIVS = 38
# The character devices an Agent's tools expect; the disks and the rest of /dev stay out.
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx")
# statvfs flags that a bind remount must repeat (the kernel refuses to clear locked ones).
_KEPT_FLAGS = (
    (os.ST_NOSUID, 0x2),
    (os.ST_NODEV, 0x4),
    (os.ST_NOEXEC, 0x8),
    (os.ST_NOATIME, 0x400),
    (os.ST_NODIRATIME, 0x800),
    (os.ST_RELATIME, 0x200000),
)


def _namespaces() -> ModuleType:
    """``evopolicygym.namespaces``, loaded from its file when this runs as a script (so the
    package's ``__init__``, and whatever it imports, stays out of this process)."""
    if __package__:
        from evopolicygym import namespaces

        return namespaces
    import importlib.util

    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "namespaces.py"
    )
    spec = importlib.util.spec_from_file_location("_evopolicy_namespaces", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Options:
    def __init__(self, argv: list[str]) -> None:
        if "--" not in argv:
            raise SystemExit(
                "usage: jail.py [--probe] [--hide DIR]... [--read-only DIR]... -- PROGRAM ARGS..."
            )
        split = argv.index("--")
        options, self.command = argv[:split], argv[split + 1 :]
        self.probe = "--probe" in options
        self.uncontained = "--uncontained" in options
        self.allow_uncontained = "--allow-uncontained" in options
        self.hides = self._paths(options, "--hide")
        self.read_only = self._paths(options, "--read-only")
        self.writable = self._paths(options, "--writable")
        if not self.command and not self.probe:
            raise SystemExit("jail: no command to run")

    @staticmethod
    def _paths(options: list[str], flag: str) -> list[str]:
        # realpath: a symlinked spelling of the store must hide the store itself.
        return [
            os.path.realpath(options[i + 1])
            for i, o in enumerate(options)
            if o == flag and i + 1 < len(options)
        ]


def _exec(command: list[str]) -> None:
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"jail: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)


def _wait_forwarding(child: int) -> int:
    """Forward the usual termination signals to ``child``; reap everything; its exit code."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def _die_of(signum: int) -> None:
    """End this process by ``signum``, so the Host sees the Agent's signal, not a code."""
    with contextlib.suppress(ValueError, OSError):
        for forwarded in _FORWARDED:
            signal.signal(forwarded, signal.SIG_DFL)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    sys.exit(128 + signum)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enter(ns: ModuleType) -> None:
    """This process into new user, mount and PID namespaces, as an unprivileged uid."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise OSError(f"{threads} threads already run in the jail's process")
    uid, gid = os.geteuid(), os.getegid()
    inner_uid, inner_gid = uid or AGENT_UID, gid or AGENT_UID
    ns.unshare(ns.CLONE_NEWUSER)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inner_uid} {uid} 1")
    _write("/proc/self/gid_map", f"{inner_gid} {gid} 1")
    ns.unshare(ns.CLONE_NEWNS | ns.CLONE_NEWPID)
    ns.mount(None, "/", ns.MS_REC | ns.MS_PRIVATE)  # what is mounted below stays in here


def _kept_flags(path: str) -> int:
    have = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEPT_FLAGS if have & st)


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace, parents before children."""
    with open("/proc/self/mountinfo") as handle:
        points = [line.split()[4] for line in handle]
    # mountinfo escapes space, tab, newline and backslash in octal
    decoded = [p.encode().decode("unicode_escape").encode("latin-1").decode() for p in points]
    return sorted(set(decoded), key=lambda p: (p.count("/"), p))


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _read_only(ns: ModuleType, top: str, keep: list[str]) -> None:
    """Every mount at or below ``top`` read-only, except those at or below ``keep``."""
    for point in _mount_points():
        if _under(point, top) and not any(_under(point, k) for k in keep) and os.path.isdir(point):
            ns.mount(None, point, ns.MS_BIND | ns.MS_REMOUNT | ns.MS_RDONLY | _kept_flags(point))


def _bind(ns: ModuleType, path: str) -> None:
    """``path`` as a mount of its own (with what is mounted below it), so that it keeps
    its flags when the tree around it turns read-only."""
    ns.mount(path, path, ns.MS_BIND | ns.MS_REC)


def _dev(ns: ModuleType) -> None:
    """A /dev of the usual character devices only, bound from the real ones (opened before
    the tmpfs covers them; mount(2) follows /proc/self/fd links to the opened file)."""
    held = {}
    for name in (*_DEVICES, "pts"):
        with contextlib.suppress(OSError):
            held[name] = os.open(f"/dev/{name}", os.O_PATH)
    ns.mount_fs("tmpfs", "/dev", ns.MS_NOSUID | ns.MS_NOEXEC, "mode=0755,size=64k")
    for name, fd in held.items():
        target = f"/dev/{name}"
        if name == "pts":
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o666))
        ns.mount(f"/proc/self/fd/{fd}", target, ns.MS_BIND)
        os.close(fd)
    os.mkdir("/dev/shm", 0o1777)
    ns.mount_fs("tmpfs", "/dev/shm", ns.MS_NOSUID | ns.MS_NODEV, "mode=1777")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"/dev/{name}")
    if "ptmx" not in held and "pts" in held:
        os.symlink("pts/ptmx", "/dev/ptmx")


def _contain(ns: ModuleType, options: _Options) -> None:
    """PID 1's part: a fresh /proc, the Host's files hidden or read-only, a small /dev."""
    ns.mount_fs("proc", "/proc", ns.MS_NOSUID | ns.MS_NODEV | ns.MS_NOEXEC)
    ns.mount("/proc/sys", "/proc/sys", ns.MS_BIND | ns.MS_REC)
    ns.mount(
        None, "/proc/sys", ns.MS_BIND | ns.MS_REMOUNT | ns.MS_RDONLY | _kept_flags("/proc/sys")
    )
    _dev(ns)
    own = [os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/var/tmp"]
    writable = [
        d
        for d in dict.fromkeys([*options.writable, *map(os.path.realpath, filter(None, own))])
        if os.path.isdir(d)
    ]
    for directory in writable:
        _bind(ns, directory)
    # The machine read-only but for the Agent's own places: nothing it writes can change
    # what the Host or anyone else runs next (say /etc/ld.so.preload, for a root Host).
    _read_only(ns, "/", keep=[*writable, "/proc", "/dev"])
    for directory in options.read_only:  # the Host's code, though it lie in a writable place
        if os.path.isdir(directory):
            _bind(ns, directory)
            # its workspace may lie inside
            _read_only(
                ns, directory, keep=[w for w in writable if _under(w, directory) and w != directory]
            )
    for directory in options.hides:  # last: a hidden directory inside a read-only one stays hidden
        if os.path.isdir(directory):
            ns.mount_fs(
                "tmpfs", directory, ns.MS_NOSUID | ns.MS_NODEV | ns.MS_NOEXEC, "size=64k,mode=0700"
            )


def _uncontained(options: _Options, why: str) -> None:
    if not options.allow_uncontained:
        print(f"jail: cannot contain the Agent ({why}); not starting it", file=sys.stderr)
        os._exit(UNCONTAINED_EXIT)
    print(f"jail: the Agent runs without containment ({why})", file=sys.stderr)
    if options.probe:
        os._exit(0)
    _exec(options.command)


def main(argv: list[str] | None = None) -> None:
    options = _Options(sys.argv[1:] if argv is None else argv)
    if options.uncontained:
        if options.probe:
            os._exit(0)
        _exec(options.command)
    try:
        ns = _namespaces()
        _enter(ns)
    except OSError as exc:
        _uncontained(options, str(exc))
    init = os.fork()
    if init:
        code = _wait_forwarding(init)
        if code > 128:  # the Agent died of a signal (init says so, shell style): die of it too
            _die_of(code - 128)
        sys.exit(code)
    # PID 1 of the new namespace. Half-contained is not contained: past the namespaces,
    # a failure refuses to start the Agent even where uncontained Agents are allowed.
    try:
        ns.die_with_parent(None)
        _contain(ns, options)
    except OSError as exc:
        print(f"jail: cannot contain the Agent ({exc}); not starting it", file=sys.stderr)
        os._exit(UNCONTAINED_EXIT)
    agent = os.fork()
    if agent == 0:
        ns.die_with_parent(None)
        if ns.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            os._exit(UNCONTAINED_EXIT)
        if options.probe:
            print(PROBE_OK, file=sys.stderr)
            os._exit(0)
        _exec(options.command)
    os._exit(_wait_forwarding(agent))


if __name__ == "__main__":
    main()
