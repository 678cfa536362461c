"""A hostile Agent's attempts on the Host, for the jail tests: standard library only (it
runs under any Python, as any user). ``attack(target)`` tries each, and says which
succeeded; ``python jailattack.py TARGET_JSON`` prints that as one JSON line.

TARGET_JSON names what to attack: ``store`` (the Host's store directory), ``host_pid``,
``code`` (a directory of the Host's code), ``beacon`` (a file a daemon left behind keeps
appending to, in a writable place).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

DISKS = ("sd", "vd", "xvd", "nvme", "hd", "loop", "mem", "kmem", "port", "dm-", "mapper")


def _succeeds(action) -> bool:  # type: ignore[no-untyped-def]
    try:
        action()
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _store_seen(store: str) -> bool:
    try:
        return bool(os.listdir(store))
    except OSError:
        return False


def _shell(command: str) -> str:
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def _write(path: str) -> None:
    with open(path, "w") as handle:
        handle.write("the Agent was here\n")


def _rewrite(path: str) -> None:
    """Write back what ``path`` holds: the attempt is the test, not the change."""
    with open(path) as handle:
        value = handle.read()
    with open(path, "w") as handle:
        handle.write(value)


def _daemon(beacon: str) -> None:
    """A grandchild in a new session, appending to ``beacon``: it must not outlive the Agent."""
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    for _ in range(300):
        try:
            with open(beacon, "a") as handle:
                handle.write("x")
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(0)


def attack(target: dict[str, object]) -> dict[str, bool]:
    store, host_pid = str(target["store"]), int(str(target["host_pid"]))
    code, beacon = str(target["code"]), str(target["beacon"])
    with open("/proc/self/status") as handle:
        status = handle.read()
    cap_eff = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16
    )
    done = {
        "store_readable": _store_seen(store),
        "host_visible": os.path.exists(f"/proc/{host_pid}"),
        "host_signalable": _succeeds(lambda: os.kill(host_pid, 0)),
        "umounted": _succeeds(
            lambda: subprocess.run(["umount", store], capture_output=True, check=True)
        )
        and _store_seen(store),
        "umounted_nested": bool(
            _shell(f"unshare -Urm sh -c 'umount {store} 2>/dev/null; ls -A {store}' 2>/dev/null")
        ),
        "code_written": _succeeds(lambda: _write(os.path.join(code, "agent-was-here.py"))),
        "etc_written": _succeeds(lambda: _write("/etc/evopolicy-agent-was-here")),
        "sysctl_written": _succeeds(lambda: _rewrite("/proc/sys/kernel/domainname")),
        "disks_visible": any(name.startswith(DISKS) for name in os.listdir("/dev")),
        "root": os.getuid() == 0 or os.geteuid() == 0,
        "capabilities": cap_eff != 0,
    }
    _daemon(beacon)
    return done


if __name__ == "__main__":
    print(json.dumps(attack(json.loads(sys.argv[1]))), flush=True)
