"""The Host side of one Episode: a fresh Environment here, a fresh policy process there.

The Environment is trusted and stays in the Host; only observations go out
and only actions come back, each a bounded PolicyValue frame. One deadline
covers the policy's start-up and every ``act()``; the time the Environment
takes is not charged to the policy.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import shutil
import signal
import socket
import struct
import tempfile
import time
from typing import Any, NamedTuple

import msgspec

from evopolicygym.benchmark import (
    Benchmark,
    Environment,
    EpisodeRecord,
    EpisodeSpec,
    InvalidAction,
    Step,
)
from evopolicygym.evaluation import wire
from evopolicygym.evaluation.config import EvaluationConfig, EvaluationError, PlannedEpisode
from evopolicygym.evaluation.forkserver import ForkServerClient, ForkServerError
from evopolicygym.values import PolicyValueError, decode_value, encode_value

__all__ = ["EpisodeRunner"]

_EXIT_GRACE_S = 2.0
_HEADER_SIZE = wire.HEADER.size
_HEADER_UNPACK = wire.HEADER.unpack_from
_SLICE_S = 0.05  # deadline and output checks happen at least this often while waiting
_DRAIN_EVERY = 64  # steps between non-blocking reads of the policy's output
_FAILURE_CHARS = 4000


class _PolicyFailure(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reaped = False  # the exit status was already collected


class _Outcome(NamedTuple):
    """How far an Episode got, and the policy's failure that ended it, if one did."""

    steps: int = 0
    total: float = 0.0
    terminated: bool = False
    truncated: bool = False
    failure: _PolicyFailure | None = None


class _Channel:
    """Frames to and from one policy process, its output drained into a bounded tail.

    Every wait — for an answer, for room to send, for the rest of a frame — is
    charged to the Episode deadline, so a policy cannot stall the Host by
    dripping bytes or by not reading. Each exchange fixes its absolute deadline
    once (its start plus what is left of the Episode's budget) and no wait goes
    past it, however the policy paces its answers.
    """

    def __init__(
        self, sock: socket.socket, output_fd: int, tail_bytes: int, budget_s: float
    ) -> None:
        self.sock = sock
        self.reader = wire.FrameReader(sock)
        self.output_fd = output_fd
        self.tail = bytearray()
        self.tail_bytes = tail_bytes
        self.dropped = 0  # bytes of output cut from the front of the tail
        self.budget_s = budget_s
        self.used_s = 0.0
        self.output_open = True
        self.deadline = 0.0  # monotonic time by which the current exchange must be answered
        # Kernel timeouts on the blocking socket: the fast path is one system call per
        # answer; a slice that passes empty-handed drops into the polling slow path. Within
        # the budget's last slice they shrink to what remains (which only ever decreases).
        self.slice_s = _SLICE_S
        self._set_timeouts(_SLICE_S)

    def _set_timeouts(self, seconds: float) -> None:
        micros = max(1, int(seconds * 1e6))  # a zero timeout would mean none at all
        timeout = struct.pack("ll", micros // 1_000_000, micros % 1_000_000)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeout)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeout)
        self.slice_s = seconds

    def drain_output(self) -> None:
        """Read whatever the policy has printed, keeping only the tail."""
        while self.output_open:
            try:
                chunk = os.read(self.output_fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                self.output_open = False
                return
            self.tail += chunk
            if len(self.tail) > self.tail_bytes:
                self.dropped += len(self.tail) - self.tail_bytes
                del self.tail[: len(self.tail) - self.tail_bytes]

    def tail_text(self) -> str:
        """The output's tail as text, saying how much came before it where any was cut."""
        text = self.tail.decode("utf-8", "replace")
        return f"[… {self.dropped:,} earlier bytes of output cut]\n{text}" if self.dropped else text

    def _timeout(self) -> _PolicyFailure:
        return _PolicyFailure("timeout", f"policy exceeded the {self.budget_s:g}s Episode deadline")

    def _check_deadline(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._timeout()
        return remaining

    def _wait(self, events: int) -> None:
        """Block until the socket has ``events`` (or output arrives) within the deadline."""
        poller = select.poll()
        poller.register(self.sock.fileno(), events)
        if self.output_open:
            poller.register(self.output_fd, select.POLLIN)
        # poll() takes whole milliseconds: round up, so the wait never ends just short of it.
        ready = poller.poll(math.ceil(min(self._check_deadline(), 1.0) * 1000.0))
        for fd, _ in ready:
            if fd == self.output_fd:
                self.drain_output()
        self._check_deadline()

    def _send(self, frame: bytes) -> None:
        view = memoryview(frame)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                self._wait(select.POLLOUT)  # the policy is not reading
                continue
            except OSError as exc:
                raise _PolicyFailure(
                    "protocol_error", f"policy process stopped reading ({exc.strerror})"
                ) from exc
            view = view[sent:]

    def exchange(self, frame: bytes) -> tuple[int, bytes]:
        """Send a frame (if any) and return the answer, charging the wait to the deadline.

        An answer that comes after the deadline is a timeout too: what counts is the
        clock, not whether some wait happened to come back empty.
        """
        started = time.monotonic()
        remaining = self.budget_s - self.used_s
        self.deadline = deadline = started + remaining
        if remaining <= 0:
            raise self._timeout()
        if remaining < self.slice_s:
            self._set_timeouts(remaining)
        reader = self.reader
        got: tuple[int, bytes] | None = None
        try:
            if frame:
                self._send(frame)
            while got is None:
                if not reader.buffer:
                    # The usual case: one read holds exactly one whole frame.
                    try:
                        n = self.sock.recv_into(reader.chunk)
                    except BlockingIOError:
                        self._wait(select.POLLIN)
                        continue
                    if n >= _HEADER_SIZE:
                        length, kind = _HEADER_UNPACK(reader.chunk)
                        if length + _HEADER_SIZE == n:
                            got = kind, bytes(reader.view[_HEADER_SIZE:n])
                            break
                    if n == 0:
                        raise EOFError
                    reader.buffer += reader.view[:n]
                got = reader.next_frame()
                if got is not None:
                    break
                self._check_deadline()  # a policy dripping a frame byte by byte
                try:
                    if not reader.feed():
                        raise EOFError
                except BlockingIOError:
                    self._wait(select.POLLIN)
        except wire.FrameTooLarge as exc:
            raise _PolicyFailure(
                "resource_limit",
                f"policy sent a {exc.args[0]}-byte frame, over the {wire.MAX_PAYLOAD}-byte limit",
            ) from None
        finally:
            ended = time.monotonic()
            self.used_s += ended - started
        if ended > deadline:
            raise self._timeout()
        assert got is not None
        return got

    def send_close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.send(wire.pack(wire.CLOSE), socket.MSG_DONTWAIT)


def _exit_failure(status: int | None, contained: bool = True) -> _PolicyFailure:
    """Classify a policy process that ended without answering."""
    if not contained:
        # No untrusted code has run before the CONTAINED frame: this is our fault.
        raise EvaluationError(f"the policy worker could not be set up (wait status {status})")
    if status is None:
        return _PolicyFailure("protocol_error", "policy process stopped answering")
    if os.WIFSTOPPED(status):  # it made itself traced and a signal stopped it
        return _PolicyFailure(
            "exception", f"policy process stopped by {_signal_name(os.WSTOPSIG(status))} (traced)"
        )
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = _signal_name(sig)
        if sig in (signal.SIGXCPU, signal.SIGXFSZ, signal.SIGKILL):
            return _PolicyFailure(
                "resource_limit", f"policy process killed by {name} (resource limit)"
            )
        return _PolicyFailure("exception", f"policy process crashed with {name}")
    try:
        code = os.waitstatus_to_exitcode(status)
    except ValueError:  # no status the kernel gives a child that ran our code alone
        return _PolicyFailure("protocol_error", f"policy process ended with wait status {status}")
    return _PolicyFailure(
        "protocol_error", f"policy process exited with code {code} without answering"
    )


def _signal_name(sig: int) -> str:
    return signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)


class _Worker:
    """A requested policy process and the Host's ends of its channels."""

    __slots__ = ("out_r", "request_id", "scratch", "sock")

    def __init__(self, request_id: int, sock: socket.socket, out_r: int, scratch: str) -> None:
        self.request_id = request_id
        self.sock = sock
        self.out_r = out_r
        self.scratch = scratch


class EpisodeRunner:
    """Runs Episodes one after another; one per thread or process. Call ``close`` when done.

    With ``prespawn`` the next Episode's policy process is requested as soon as
    the current one is running, so forking and containment overlap with play.
    Each Episode still gets its own fresh process.
    """

    def __init__(
        self,
        benchmark: Benchmark,
        fork_server: ForkServerClient,
        program_dir: str,
        scratch_root: str,
        config: EvaluationConfig,
        cpu: int | None = None,
        prespawn: bool = True,
    ) -> None:
        self.benchmark = benchmark
        self.client = fork_server
        self.program_dir = program_dir
        self.scratch_root = scratch_root
        self.config = config
        self.cpu = cpu
        self.cpu_seconds = config.limits.cpu_seconds or int(config.episode_timeout) + 2
        self.limits = msgspec.to_builtins(config.limits)
        self.prespawn = prespawn
        self._spare: _Worker | None = None
        self._closing: list[int] = []

    def _start_frame(self, policy_seed: int) -> bytes:
        spec = self.benchmark.spec
        payload = encode_value(
            {
                "observation_space": spec.observation_space,
                "action_space": spec.action_space,
                "metadata": spec.metadata,
                "environment_parameters": spec.environment_parameters,
                "policy_seed": policy_seed,
            }
        )
        return wire.pack(wire.START, payload)

    def _launch(self) -> _Worker:
        """Ask the fork server for a policy process; it gets contained while we do other work."""
        # Without a scratch root the policy's scratch is its jail's own tmpfs: no directory
        # here (removing one a jail had seen cost ~0.5-0.9 ms an Episode).
        scratch = (
            tempfile.mkdtemp(prefix="episode-", dir=self.scratch_root) if self.scratch_root else ""
        )
        host_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        os.set_blocking(out_r, False)
        request = {
            "program_dir": self.program_dir,
            "scratch_dir": scratch,
            "limits": self.limits,
            "cpu_seconds": self.cpu_seconds,
            "cpu": self.cpu,
        }
        try:
            request_id = self.client.request_spawn(request, child_sock.fileno(), out_w)
        except OSError as exc:
            raise EvaluationError(f"could not reach the policy fork server: {exc}") from exc
        finally:
            child_sock.close()
            os.close(out_w)
        return _Worker(request_id, host_sock, out_r, scratch)

    def _release(self, worker: _Worker) -> None:
        worker.sock.close()
        os.close(worker.out_r)
        if worker.scratch:
            shutil.rmtree(worker.scratch, ignore_errors=True)

    def run(self, planned: PlannedEpisode) -> EpisodeRecord:
        started = time.monotonic()
        worker, self._spare = self._spare or self._launch(), None
        self._reap(block=False)
        pid: int | None = None
        try:
            try:
                pid = self.client.spawned(worker.request_id)
            except ForkServerError as exc:
                raise EvaluationError(f"could not start a policy process: {exc}") from exc
            channel = _Channel(
                worker.sock,
                worker.out_r,
                self.config.output_tail_bytes,
                self.config.episode_timeout,
            )
            record = self._play(planned.spec, planned.policy_seed, channel, pid)
            pid = None  # _play has stopped it or handed it to _closing
            return msgspec.structs.replace(record, duration_s=time.monotonic() - started)
        finally:
            if pid is not None:
                self._stop(pid)
            self._release(worker)

    def close(self) -> None:
        """Stop the spare process and wait for every closed one: nothing is left behind."""
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(ForkServerError, OSError):
                self._stop(self.client.spawned(spare.request_id))
            self._release(spare)
        self._reap(block=True)

    def _reap(self, block: bool) -> None:
        """Collect exits of policies told to close; kill any that linger when blocking."""
        still: list[int] = []
        for pid in self._closing:
            if self.client.wait(pid, _EXIT_GRACE_S if block else 0.0) is None:
                if block:
                    self._stop(pid)
                else:
                    still.append(pid)
        self._closing = still

    def _stop(self, pid: int) -> int | None:
        with contextlib.suppress(OSError):
            self.client.kill(pid)
        return self.client.wait(pid, _EXIT_GRACE_S * 5)

    def _play(
        self, episode: EpisodeSpec, policy_seed: int, channel: _Channel, pid: int
    ) -> EpisodeRecord:
        env = self._make_environment(episode)
        trace: list[Step] | None = [] if self.config.trace_steps > 0 else None
        outcome = _Outcome()
        first_observation: Any = None
        summary: dict[str, Any] = {}
        try:
            first_observation = self._reset(env)
            outcome = self._steps(env, first_observation, policy_seed, channel, pid, trace)
            summary = self._summary(env)
        finally:
            self._close_environment(env)
        failure = outcome.failure
        self._end_policy(failure, channel, pid)
        if not math.isfinite(outcome.total):
            raise EvaluationError(
                f"{self.benchmark.spec.id}: the Environment produced a non-finite return"
            )
        return EpisodeRecord(
            spec=episode,
            policy_seed=policy_seed,
            status=failure.status if failure else "ok",  # type: ignore[arg-type]
            total_reward=float(outcome.total),
            steps=outcome.steps,
            terminated=outcome.terminated,
            truncated=outcome.truncated,
            failure=failure.message if failure else None,
            stderr_tail=channel.tail_text(),
            initial_observation=first_observation,
            trace=trace,
            summary=summary,
        )

    def _make_environment(self, episode: EpisodeSpec) -> Environment:
        try:
            return self.benchmark.make_environment(episode)
        except Exception as exc:
            raise EvaluationError(
                f"{self.benchmark.spec.id}: could not make the Environment: {exc!r}"
            ) from exc

    def _reset(self, env: Environment) -> Any:
        try:
            return env.reset()
        except Exception as exc:
            raise EvaluationError(
                f"{self.benchmark.spec.id}: Environment.reset failed: {exc!r}"
            ) from exc

    def _close_environment(self, env: Environment) -> None:
        try:
            env.close()
        except Exception as exc:
            raise EvaluationError(
                f"{self.benchmark.spec.id}: Environment.close failed: {exc!r}"
            ) from exc

    def _steps(
        self,
        env: Environment,
        observation: Any,
        policy_seed: int,
        channel: _Channel,
        pid: int,
        trace: list[Step] | None,
    ) -> _Outcome:
        """Start the policy, then step until the Episode ends or the policy fails (a failure
        is returned with how far the Episode got; a fault of the Environment raises)."""
        steps = 0
        total = 0.0
        terminated = truncated = False
        max_steps = self.benchmark.spec.max_episode_steps
        validate = self.benchmark.validate_action
        obs_frame = wire.OBSERVATION
        try:
            if self.prespawn:
                # At once: the next policy contains itself while this one does and plays.
                self._spare = self._launch()
            self._expect(channel, b"", wire.CONTAINED, pid, contained=False)
            self._expect(channel, self._start_frame(policy_seed), wire.READY, pid)
            while True:
                try:
                    frame = wire.pack(obs_frame, encode_value(observation))
                except PolicyValueError as exc:
                    raise EvaluationError(
                        f"{self.benchmark.spec.id}: observation is not a PolicyValue: {exc}"
                    ) from exc
                payload = self._expect(channel, frame, wire.ACTION, pid)
                try:
                    raw_action = decode_value(payload)
                except PolicyValueError as exc:
                    raise _PolicyFailure(
                        "protocol_error", f"malformed action frame: {exc}"
                    ) from exc
                try:
                    action = validate(raw_action)
                    result = env.step(action)
                except InvalidAction as exc:
                    raise _PolicyFailure("invalid_action", f"step {steps}: {exc}") from exc
                except (EvaluationError, _PolicyFailure):
                    raise
                except Exception as exc:
                    raise EvaluationError(
                        f"{self.benchmark.spec.id}: Environment.step failed at step {steps}: "
                        f"{exc!r}"
                    ) from exc
                steps += 1
                total += result.reward
                observation = result.observation
                terminated, truncated = result.terminated, result.truncated
                if not terminated and steps >= max_steps:
                    truncated = True  # the Host's step limit ends it: the trace says so too
                if trace is not None and len(trace) < self.config.trace_steps:
                    trace.append(
                        Step(raw_action, result.reward, terminated, truncated, observation)
                    )
                if terminated or truncated:
                    break
                if not steps % _DRAIN_EVERY:
                    channel.drain_output()
                if steps >= max_steps:
                    truncated = True
                    break
        except _PolicyFailure as exc:
            return _Outcome(steps, total, terminated, truncated, exc)
        return _Outcome(steps, total, terminated, truncated)

    def _end_policy(self, failure: _PolicyFailure | None, channel: _Channel, pid: int) -> None:
        """Close a policy that played to the end, stop one that failed; keep its output."""
        if failure is None:
            channel.send_close()
            # Nothing is owed after CLOSE and policy code can patch the worker to linger,
            # so kill it now; the exit status is collected later, off the critical path.
            with contextlib.suppress(OSError):
                self.client.kill(pid)
            self._closing.append(pid)
            channel.drain_output()
        else:
            if not failure.reaped:
                self._stop(pid)
            self._collect_output(channel)

    def _summary(self, env: Any) -> dict[str, Any]:
        """The Environment's domain facts of the Episode, where it offers them (trusted code:
        a fault here aborts the Evaluation like any Environment fault)."""
        getter = getattr(env, "summary", None)
        if not callable(getter):
            return {}
        try:
            summary = getter()
            encode_value(summary)
        except Exception as exc:
            raise EvaluationError(
                f"{self.benchmark.spec.id}: Environment.summary failed: {exc!r}"
            ) from exc
        if type(summary) is not dict:
            raise EvaluationError(
                f"{self.benchmark.spec.id}: Environment.summary must return a dict"
            )
        return summary

    def _expect(
        self, channel: _Channel, frame: bytes, kind: int, pid: int, contained: bool = True
    ) -> bytes:
        try:
            got, payload = channel.exchange(frame)
        except EOFError:
            status = self.client.wait(pid, _EXIT_GRACE_S)
            failure = _exit_failure(status, contained)
            failure.reaped = status is not None
            raise failure from None
        except _PolicyFailure:
            if not contained:
                raise EvaluationError(
                    "the policy worker did not finish its set-up in time"
                ) from None
            raise
        if got == kind:
            return payload
        if not contained:
            raise EvaluationError("the policy worker sent an unexpected first frame")
        if got == wire.FAIL:
            # Written by the worker, but policy code can forge it: trust nothing in it.
            try:
                reported, message = msgspec.msgpack.decode(payload, type=tuple[str, str])
            except Exception:
                raise _PolicyFailure("protocol_error", "malformed failure report") from None
            if reported not in ("exception", "protocol_error", "resource_limit"):
                reported = "protocol_error"
            raise _PolicyFailure(reported, wire.last_chars(message, _FAILURE_CHARS))
        raise _PolicyFailure("protocol_error", f"unexpected frame kind {got!r}")

    def _collect_output(self, channel: _Channel) -> None:
        """Read what the policy printed before it died (bounded in time and size)."""
        deadline = time.monotonic() + 0.2
        while channel.output_open and time.monotonic() < deadline:
            ready, _, _ = select.select([channel.output_fd], [], [], 0.02)
            if not ready:
                break
            channel.drain_output()
