"""Run an Agent where it cannot reach the Host's log: its own mount and PID namespaces.

``python -m evopolicygym.agents.jail [--uncontained] --hide DIR [--hide DIR ...] -- PROGRAM ARGS...``

The Agent keeps the machine as its user sees it (tools, network, its workspace, the
session socket) except that every ``--hide`` directory (the store) is an empty tmpfs,
and ``/proc`` shows only its own processes, so the Host's cwd and files are not
reachable through ``/proc/<host pid>``. Mounts are private to the namespace: nothing
done here is visible to the Host.

Three processes: this one (the Host's child, which it waits on and signals), an init
(PID 1 of the new namespace, which reaps and forwards signals: PID 1 ignores signals
it has no handler for) and the Agent. Where namespaces are unavailable the Agent runs
uncontained, and a line on stderr says so; ``--uncontained`` (the Host passes it under
``EVOPOLICY_CONTAINMENT=process-group``) asks for that outright.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from evopolicygym.namespaces import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    die_with_parent,
    enter_user_namespace,
    mount,
    mount_fs,
    unshare,
)

__all__ = ["main"]

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _parse(argv: list[str]) -> tuple[list[str], list[str], bool]:
    if "--" not in argv:
        raise SystemExit("usage: python -m evopolicygym.agents.jail [--hide DIR]... -- PROGRAM ARGS...")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    hides = [options[i + 1] for i, option in enumerate(options) if option == "--hide" and i + 1 < len(options)]
    if not command:
        raise SystemExit("jail: no command to run")
    return [os.path.abspath(h) for h in hides], command, "--uncontained" in options


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


def main(argv: list[str] | None = None) -> None:
    hides, command, uncontained = _parse(sys.argv[1:] if argv is None else argv)
    if uncontained:
        _exec(command)
    try:
        if os.geteuid() != 0 and not enter_user_namespace():
            raise OSError("no user namespaces")
        unshare(CLONE_NEWNS | CLONE_NEWPID)
        mount(None, "/", MS_REC | MS_PRIVATE)  # what is mounted below stays in here
    except OSError as exc:
        print(f"jail: the Agent runs without containment ({exc})", file=sys.stderr)
        _exec(command)
    init = os.fork()
    if init:
        code = _wait_forwarding(init)
        if code > 128:  # the Agent died of a signal (init says so, shell style): die of it too
            _die_of(code - 128)
        sys.exit(code)
    # PID 1 of the new namespace.
    try:
        die_with_parent(None)
        mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for directory in hides:
            if os.path.isdir(directory):
                mount_fs("tmpfs", directory, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0700")
    except OSError as exc:
        # Half-contained is not contained: refuse rather than run with the store in view.
        print(f"jail: cannot hide the Host's files ({exc}); not starting the Agent", file=sys.stderr)
        os._exit(126)
    agent = os.fork()
    if agent == 0:
        die_with_parent(None)
        _exec(command)
    os._exit(_wait_forwarding(agent))


if __name__ == "__main__":
    main()
