"""Carry an experiment's Runs on a Ray cluster: each carry command (``evopolicy resume RUN``)
runs on whichever node Ray places it, as a subprocess of a small actor of its own.

Why an actor per carry, not a plain task: the runner forwards Ctrl-C and SIGTERM to the
running Runs (``Executor.signal``), and an actor's ``signal`` method reaches the process
it started on its node; a task has no such door. The actor reserves the Run's CPUs
(``cpus_per_run``: the Run's evaluation jobs), so Ray places no more Runs on a node than
it has CPUs for, and Runs spread over the nodes.

Nothing here is tied to one machine: the carry's interpreter is the node's own (the
command names the driver's, which another machine need not have); a PostgreSQL store's
URL, and the variables the Agents need, go to the carry in its environment through the
actor's call, never on a command line (any user of a node could read it there) and never
in Ray's runtime environment (which its dashboard shows). A carry dies with the actor
that started it (Linux's parent-death signal, set before the carry is executed), so a node
or worker that dies leaves no Host carrying a Run for nobody; its Run lock goes with it
(a file lock or a PostgreSQL session lock, both released when the holder dies), and the
executor places the carry again on a node that lives: the Run goes on from its log, its
Agent workspace rebuilt there (``run.publisher``). Ray is imported only when a
``RayExecutor`` is made.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evopolicygym.experiments.runner import STDERR_TAIL

__all__ = ["RAY_MISSING", "Carrier", "RayExecutor", "RayUnavailable", "import_ray"]

RAY_MISSING = (
    "--executor ray needs Ray, which is not installed: install it with `uv sync --extra ray`"
)
PYTHON = "{python}"  # argv[0] that stands for the interpreter of the node the carry lands on
REPLACEMENTS = 3  # placements a carry gets after the first, each after its actor was lost

# Run as `python -S -c SHIM PARENT ARGV...`: the carry is SIGKILLed when the actor's thread
# that started it dies (PR_SET_PDEATHSIG survives exec), and exits at once if it already
# has. A shim rather than a preexec function: a Ray worker is multi-threaded, where code
# run between fork and exec may deadlock. A Ray worker also ignores SIGINT, and an ignored
# signal stays ignored across exec (a Python started so never raises KeyboardInterrupt):
# the carry gets the default dispositions and an empty signal mask, as from a shell.
_SHIM = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_SETMASK, [])\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _first_line(exc: BaseException) -> str:
    return next(
        (line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__
    )


def _check_reachable(address: str | None, timeout: float = 10.0) -> None:
    """``RayUnavailable`` when nothing listens at a HOST:PORT address: Ray itself would try
    to reach it for ever, printing a warning every few seconds."""
    if not address or "://" in address or address in ("auto", "local"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailable(
            f"the Ray address {address!r} is not HOST:PORT (as `ray start --head` prints it)"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise RayUnavailable(
            f"cannot join the Ray cluster at {address}: {reason.lower()}"
        ) from None


def _cluster_errors_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages (such as a node that died) on stdout,
    where a command's JSON output goes: they are sent to stderr instead. (Ray has no switch
    for it; where its private function is not there, it prints as it would.)"""
    with contextlib.suppress(Exception):
        from ray._private import worker

        original = worker.print_to_stdstream
        if getattr(original, "to_stderr", False):
            return

        def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            return original({**data, "is_err": True}, *args, **kwargs)

        to_stderr.to_stderr = True  # type: ignore[attr-defined]
        worker.print_to_stdstream = to_stderr


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached (one line saying which)."""


def import_ray() -> Any:
    """The ``ray`` module; ``RayUnavailable`` naming the extra to install when it is missing."""
    # Each node carries Runs with the project installed there, as `ray start` found it: the
    # driver's checkout is not packaged and re-installed per node (Ray does that for a driver
    # run by `uv run`, which would sync a virtualenv on every node, downloading, at run time).
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.partition(".")[0] != "ray":
            raise  # Ray is there but broken: not ours to hide
        raise RayUnavailable(RAY_MISSING) from None
    return ray


class Carrier:
    """One carry on one node (a Ray actor; ``RayExecutor`` makes it remote): ``carry`` runs
    the command to its end, ``signal`` passes a signal to it meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._stopped: int | None = None  # a signal that came before the carry started

    def carry(self, argv: list[str], env: Mapping[str, str]) -> tuple[int, str]:
        """Run ``argv`` (its own process group) with ``env`` over this node's environment;
        its exit status and the tail of its stderr."""
        if argv and argv[0] == PYTHON:
            argv = [sys.executable, *argv[1:]]
        with tempfile.TemporaryFile() as log:
            with self._lock:
                if self._stopped is not None:
                    return 128 + self._stopped, "stopped before its carrying process started"
                self._child = subprocess.Popen(
                    [sys.executable, "-S", "-c", _SHIM, str(os.getpid()), *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    env={**os.environ, **env},
                    start_new_session=True,  # a signal to this worker's group stays here
                )
            status = self._child.wait()
            log.seek(0)
            tail = log.read()[-STDERR_TAIL:].decode("utf-8", "replace")
        return status, tail

    def signal(self, signum: int) -> None:
        with self._lock:
            if self._child is None:
                self._stopped = signum
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._child.pid, signum)


@dataclass
class _Carry:
    key: str
    argv: list[str]
    actor: Any
    placements: int = 1
    stop_reply: Any = None


class RayExecutor:
    """An ``Executor`` (``experiments.runner``) whose carries run on a Ray cluster, at most
    ``max_runs`` at once (default: the cluster's CPUs // ``cpus_per_run``, at least 1).

    ``address``: the cluster to join (``ray.init``'s: None joins ``RAY_ADDRESS`` or the one
    started on this machine, else starts one here). ``env``: variables every carry gets
    (the store URL, the Agents' keys). A carry whose actor is lost (its node died) is placed
    again, up to ``replacements`` times; past that, or after ``signal``, it ends with
    status -1 and a line saying so."""

    def __init__(
        self,
        max_runs: int | None = None,
        *,
        address: str | None = None,
        cpus_per_run: float = 1,
        env: Mapping[str, str] | None = None,
        replacements: int = REPLACEMENTS,
        poll_interval: float = 0.5,
        stop_grace: float = 20.0,
    ) -> None:
        if max_runs is not None and max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        if cpus_per_run <= 0:
            raise ValueError("cpus_per_run must be positive")
        ray = import_ray()
        self._ray = ray
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            _check_reachable(address or os.environ.get("RAY_ADDRESS"))
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,  # a carry's stderr comes back with its end, not live
                    logging_level=logging.WARNING,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"at {address}" if address else "on this machine"
                chain = f"{exc} {exc.__cause__} {exc.__context__}"
                why = (
                    "it requires its authentication token (set RAY_AUTH_MODE=token, "
                    "with the head's token in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
                    if "InvalidAuthToken" in chain or "AuthenticationError" in chain
                    else _first_line(exc)
                )
                raise RayUnavailable(f"cannot join the Ray cluster {where}: {why}") from None
            _cluster_errors_to_stderr()
        self.cpus_per_run = cpus_per_run
        if max_runs is None:
            max_runs = max(1, int(ray.cluster_resources().get("CPU", 0) // cpus_per_run))
        self.max_runs = max_runs
        self.replacements = replacements
        self.poll_interval = poll_interval
        self.stop_grace = stop_grace
        self.replaced = 0  # placements made again after a lost actor, over this executor's life
        self._env = dict(env or {})
        self._stopping = False
        self._signalled: dict[Any, float] = {}  # a signal's reply -> when it was sent
        self._actor_class = ray.remote(Carrier).options(
            num_cpus=cpus_per_run,
            max_concurrency=2,  # ``signal`` while ``carry`` runs
            max_restarts=0,  # a lost carry is placed again here, where it is counted
            scheduling_strategy="SPREAD",
        )
        self._inflight: dict[Any, _Carry] = {}

    def free(self) -> int:
        return self.max_runs - len(self._inflight)

    def running(self) -> int:
        return len(self._inflight)

    def start(self, key: str, argv: list[str]) -> None:
        if self.free() <= 0:
            raise RuntimeError("no free slot")
        if argv and argv[0] == sys.executable:
            argv = [PYTHON, *argv[1:]]
        self._place(_Carry(key, argv, None, 0))

    def _place(self, carry: _Carry) -> None:
        carry.actor = self._actor_class.remote()
        carry.placements += 1
        self._inflight[carry.actor.carry.remote(carry.argv, self._env)] = carry

    def wait(self) -> list[tuple[str, int, str]]:
        ray = self._ray
        while self._inflight:
            # A timeout, so the runner's signal handlers get to run while nothing ends.
            ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=self.poll_interval)
            if not ready:
                self._kill_unresponsive()
                continue
            ready, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=0)
            results = []
            for ref in ready:
                carry = self._inflight.pop(ref)
                try:
                    status, tail = ray.get(ref)
                except (
                    ray.exceptions.RayTaskError
                ) as exc:  # ``carry`` itself failed (cannot start it)
                    status, tail = -1, f"its Ray actor could not run it: {_first_line(exc)}"
                except ray.exceptions.RayError as exc:  # the actor, its worker or its node lost
                    if not self._stopping and carry.placements <= self.replacements:
                        self.replaced += 1
                        self._place(carry)
                        continue
                    status = -1
                    tail = (
                        f"its Ray actor was lost ({carry.placements} placements): "
                        f"{_first_line(exc)}"
                    )
                else:
                    with contextlib.suppress(Exception):
                        ray.kill(carry.actor)  # its carry has ended: give its CPUs back now
                results.append((carry.key, status, tail))
            if results:
                return results
        return []

    def signal(self, signum: int) -> None:
        stop = signum in (signal.SIGINT, signal.SIGTERM)
        if stop:
            self._stopping = True  # no placement again for a carry stopped on purpose
        now = time.monotonic()
        for carry in self._inflight.values():
            with contextlib.suppress(Exception):
                reply = carry.actor.signal.remote(signum)
                if stop:
                    self._signalled[reply] = now
                    carry.stop_reply = reply

    def _kill_unresponsive(self) -> None:
        """Stopping: an actor that has not taken its signal within ``stop_grace`` seconds (not
        yet placed, or its node unreachable) is killed, so ``wait`` ends; its Run, if its
        carry had begun, is left to be resumed, as after a SIGKILL."""
        if not self._signalled:
            return
        taken, _ = self._ray.wait(
            list(self._signalled), num_returns=len(self._signalled), timeout=0
        )
        for reply in taken:
            del self._signalled[reply]
        late = {
            reply
            for reply, sent in self._signalled.items()
            if time.monotonic() - sent > self.stop_grace
        }
        for carry in self._inflight.values():
            if carry.stop_reply in late:
                with contextlib.suppress(Exception):
                    self._ray.kill(carry.actor)
        for reply in late:
            del self._signalled[reply]

    def close(self) -> None:
        for carry in self._inflight.values():  # only where close comes before they ended (an error)
            with contextlib.suppress(Exception):
                self._ray.kill(carry.actor)
        self._inflight.clear()
        if self._owns_connection:
            self._ray.shutdown()
