"""The policy side of one Episode, run in a process forked from the fork server.

Everything here runs inside untrusted territory: after ``child_main`` has
contained the process, it imports the submitted ``policy.py``, calls
``make_policy`` and answers each observation with ``act``. Failures are
reported as FAIL frames when the process can still speak; otherwise the Host
classifies the exit status.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any, NoReturn

import msgspec
import numpy as np

from evopolicygym.evaluation import seccomp, wire
from evopolicygym.evaluation.environment import POLICY_ENVIRONMENT
from evopolicygym.evaluation.sandbox import (
    PROGRAM_MOUNT,
    SCRATCH_MOUNT,
    ResourceLimits,
    apply_limits,
    drop_privileges,
    enter_episode_jail,
)
from evopolicygym.namespaces import die_with_parent
from evopolicygym.policy import PolicyContext
from evopolicygym.values import PolicyValueError, decode_value, encode_value

__all__ = ["child_main", "prepare_fork_server"]


def prepare_fork_server() -> None:
    """Work every child would repeat, done once before forking (each first touch after a
    fork copies pages): the policy environment, msgspec's converter for the limits, and the
    value decoders a policy reads its START frame and observations with."""
    os.environ.clear()
    os.environ.update(POLICY_ENVIRONMENT)
    tempfile.tempdir = None  # forget the directory cached before TMPDIR changed
    msgspec.convert(msgspec.to_builtins(ResourceLimits()), ResourceLimits)
    sample = encode_value({"space": ("box", [np.zeros(2, dtype=np.float32)], 1.5, None, True, "s")})
    decode_value(sample, arrays=False)
    decode_value(sample, writable=False)
    sys.stdout.flush()
    sys.stderr.flush()


_TRACEBACK_CHARS = 4000
_EPISODE_FD = 3
_OUT_OF_MEMORY = wire.pack(
    wire.FAIL,
    msgspec.msgpack.encode(["resource_limit", "MemoryError: the memory limit was reached"]),
)


def _fail(sock: socket.socket, status: str, message: str) -> NoReturn:
    with contextlib.suppress(OSError):
        sock.sendall(
            wire.pack(
                wire.FAIL,
                msgspec.msgpack.encode([status, wire.last_chars(message, _TRACEBACK_CHARS)]),
            )
        )
    os._exit(0)


def _describe(exc: BaseException) -> str:
    tail = traceback.format_exception(exc)
    # Drop the frames of this module: the policy author needs their own frames only.
    text = "".join(line for line in tail if __file__ not in line)
    return text.strip()


def _classify(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (
        11,
        24,
        27,
        28,
    ):  # EAGAIN (fork), EMFILE, EFBIG, ENOSPC
        return "resource_limit"
    return "exception"


def child_main(
    request: dict[str, Any], episode_fd: int, output_fd: int, keep_open: int = 0
) -> NoReturn:
    """Contain this process, then serve one Episode. Never returns."""
    try:
        _contain(request, episode_fd, output_fd)
    except BaseException as exc:  # containment failed: nothing untrusted ran yet
        os.write(2, f"policy worker setup failed: {exc!r}\n".encode())
        os._exit(70)
    sock = socket.socket(fileno=_EPISODE_FD)
    try:
        sock.sendall(wire.pack(wire.CONTAINED))
        _serve(sock, request)
    except MemoryError:
        with contextlib.suppress(OSError):
            sock.sendall(_OUT_OF_MEMORY)
    except BaseException as exc:
        _fail(sock, "protocol_error", f"policy worker error: {exc!r}")
    os._exit(0)


def _contain(request: dict[str, Any], episode_fd: int, output_fd: int) -> None:
    cgroup_fd = request.get("cgroup_fd")
    if cgroup_fd is not None:
        # First: everything this process and its children do is counted in its cgroup.
        os.write(cgroup_fd, b"0")
        os.close(cgroup_fd)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    os.setsid()
    # fds 0/1/2: no input, output to the Host's bounded tail; 3: the Episode socket.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.dup2(episode_fd, _EPISODE_FD)
    os.closerange(_EPISODE_FD + 1, 1 << 16)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    limits = msgspec.convert(request["limits"], ResourceLimits)
    jailed = request["containment"] == "namespaces"
    if jailed:
        enter_episode_jail(
            request["program_dir"], request["work_dir"], limits.scratch_mb, request["uid"]
        )
        program_dir, scratch = PROGRAM_MOUNT, SCRATCH_MOUNT
    else:
        program_dir, scratch = request["program_dir"], request["scratch_dir"]
    request["program_dir"] = program_dir
    os.chdir(scratch)
    # The fork server already holds exactly POLICY_ENVIRONMENT (see prepare_fork_server).
    if os.environ.get("HOME") != scratch:
        os.environ["HOME"] = os.environ["TMPDIR"] = scratch
    own_uid = jailed and os.geteuid() == 0
    apply_limits(limits, request["cpu_seconds"], own_uid)
    if jailed:
        drop_privileges(request["uid"])
    # After the credential change, which clears it: die with the fork server.
    die_with_parent(None if os.getpid() == 1 else request["server_pid"])
    sys.path[:] = [program_dir, *[p for p in sys.path if p and p != program_dir]]
    sys.argv = ["policy.py"]
    # Pin late: set-up may run on any idle core; play shares the Host runner's core.
    cpu = request.get("cpu")
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    if request.get("seccomp"):
        # Last, with no_new_privs: from here on the policy cannot unpin itself (nor its
        # threads and children), trace, unshare, mount, ... (see seccomp.DENIED).
        seccomp.install()


def _serve(sock: socket.socket, request: dict[str, Any]) -> None:
    reader = wire.FrameReader(sock)
    first = reader.read_blocking()
    if first is None or first[0] != wire.START:
        os._exit(0)  # the Host went away before starting us
    start = decode_value(first[1], arrays=False)
    seed = int(start["policy_seed"])
    random.seed(seed)
    np.random.seed(seed % 2**32)
    context = PolicyContext(
        observation_space=start["observation_space"],
        action_space=start["action_space"],
        policy_seed=seed,
        metadata=start["metadata"],
        environment_parameters=start["environment_parameters"],
    )
    path = os.path.join(request["program_dir"], "policy.py")
    try:
        spec = importlib.util.spec_from_file_location("policy", path)
        if spec is None or spec.loader is None:
            _fail(sock, "protocol_error", "policy.py cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        sys.modules["policy"] = module
        spec.loader.exec_module(module)
    except SystemExit as exc:
        _fail(sock, "exception", f"policy.py called exit({exc.code!r}) at import")
    except BaseException as exc:
        _fail(sock, _classify(exc), _describe(exc))
    factory = getattr(module, "make_policy", None)
    if not callable(factory):
        _fail(sock, "protocol_error", "policy.py does not define make_policy(context)")
    try:
        policy = factory(context)
    except SystemExit as exc:
        _fail(sock, "exception", f"make_policy called exit({exc.code!r})")
    except BaseException as exc:
        _fail(sock, _classify(exc), _describe(exc))
    act = getattr(policy, "act", None)
    if not callable(act):
        _fail(
            sock,
            "protocol_error",
            "make_policy(context) returned an object without act(observation)",
        )
    sock.sendall(wire.pack(wire.READY))
    pack = wire.pack
    while True:
        frame = reader.read_blocking()
        if frame is None or frame[0] == wire.CLOSE:
            return
        observation = decode_value(frame[1], writable=False)
        try:
            action = act(observation)
        except SystemExit as exc:
            _fail(sock, "exception", f"act() called exit({exc.code!r})")
        except BaseException as exc:
            _fail(sock, _classify(exc), _describe(exc))
        try:
            payload = encode_value(action)
        except PolicyValueError as exc:
            status = "resource_limit" if "exceeds" in str(exc) else "protocol_error"
            _fail(sock, status, f"act() returned a value that cannot cross the boundary: {exc}")
        sock.sendall(pack(wire.ACTION, payload))
