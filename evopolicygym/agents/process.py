"""One running Agent: a process group that dies with the Host, its output kept.

stdout is read line by line as it arrives and parsed into transcript messages by
the provider's stream parser (``agents.streams``: a CLI's JSON events, or by
default lines that are JSON of ``transcript.Message``); every byte joins the
raw stream that is kept as a blob. stderr goes to a file, kept too.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

import msgspec

from evopolicygym.agents.streams import PARSERS, StreamParser
from evopolicygym.namespaces import die_with_parent
from evopolicygym.transcript import Message

__all__ = ["AgentProcess", "ExitStatus"]

MAX_KEPT_BYTES = 64 * 1024 * 1024  # of stdout and of stderr each; the rest is dropped
MAX_LINE_BYTES = 1024 * 1024  # a longer stdout line is kept in the raw stream only


def _die_with_parent(host: int) -> None:
    # A SIGKILLed Host must not leave its Agent working on a Run nobody records; an Agent
    # that cannot arrange it still starts.
    with contextlib.suppress(Exception):
        die_with_parent(host)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits; None where the kernel (before
    5.3) or the platform has none."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


class ExitStatus(msgspec.Struct, frozen=True, kw_only=True):
    exit_code: int | None
    signal: int | None
    reason: str  # "exited", "timeout", "stopped", "start_failed"


class AgentProcess:
    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        on_message: Callable[[Message], None],
        parser: StreamParser | None = None,
    ) -> None:
        self._on_message = on_message
        self.dropped = 0  # messages too deeply nested to record (kept in the raw stream)
        # How stdout lines become transcript messages: the provider's event stream, or by
        # default lines that are Message JSON.
        self._parser = parser if parser is not None else PARSERS["native"]()
        self._stdout = bytearray()
        self._stderr_file = tempfile.TemporaryFile()  # noqa: SIM115 -- closed in outputs()
        self._outputs: tuple[bytes, bytes] | None = None
        self._parse_lock = threading.Lock()  # the reader and a draining request share the parser
        self.started = time.monotonic()
        host = os.getpid()
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            start_new_session=True,  # its own process group: stopped as a whole
            preexec_fn=lambda: _die_with_parent(host),
        )
        self._exit_fd = _pidfd(self.process.pid)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def drain(self) -> None:
        """Deliver what the parser holds back (a message it would complete from later lines):
        a session request is arriving, and what led to it must be recorded first."""
        drain = getattr(self._parser, "drain", None)
        if drain is None:
            return
        with self._parse_lock:  # never held while delivering: delivery takes the Host's lock
            messages = drain()
        self._deliver(messages)

    @property
    def unknown_kinds(self) -> dict[str, int]:
        counts = dict(self._parser.unknown)
        if self.dropped:
            counts["too-deep"] = counts.get("too-deep", 0) + self.dropped
        return counts

    def _read(self) -> None:
        assert self.process.stdout is not None
        stream = self.process.stdout
        too_long = False  # inside a line longer than MAX_LINE_BYTES
        while True:
            # Bounded reads: a line without end must not grow the Host's memory.
            line = stream.readline(MAX_LINE_BYTES)
            if not line:
                with self._parse_lock:
                    messages = self._parser.close()
                self._deliver(messages)
                return
            if len(self._stdout) < MAX_KEPT_BYTES:
                self._stdout += line[: MAX_KEPT_BYTES - len(self._stdout)]
            complete = line.endswith(b"\n")
            if too_long or not complete:
                too_long = not complete
                continue
            with self._parse_lock:
                messages = self._parser.feed(line.rstrip(b"\r\n"))
            self._deliver(messages)

    def _deliver(self, messages: list[Message]) -> None:
        for message in messages:
            # When the Host received it: an Agent's own clock (or a bogus value) is not kept.
            try:
                self._on_message(msgspec.structs.replace(message, at=time.time_ns()))
            except RecursionError:
                # A message nested too deeply to handle stays in the raw stream only: the
                # reader must live on, or a blocked Agent would stall the Run.
                self.dropped += 1

    def wait(self, timeout: float) -> int | None:
        """The exit status once the Agent has exited, waiting at most ``timeout`` seconds;
        None if it is still running. Woken by the exit itself through a pidfd where the
        kernel has them (``Popen.wait`` polls in sleeps of up to 50 ms, which the Run would
        wait out after every Agent)."""
        fd = self._exit_fd
        if fd is not None and self.process.returncode is None:
            poller = select.poll()  # not select(): a busy Host's descriptors pass FD_SETSIZE
            poller.register(fd, select.POLLIN)
            poller.poll(max(timeout, 0.0) * 1000)
            code = self.process.poll()
        else:
            try:
                code = self.process.wait(timeout=max(timeout, 0.0))
            except subprocess.TimeoutExpired:
                code = None
        if code is not None and fd is not None:
            self._exit_fd = None
            os.close(fd)
        return code

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, then SIGKILL it after ``grace`` seconds."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)
            if self.wait(wait) is not None:
                break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # what it left behind in its group

    def status(self, reason: str) -> ExitStatus:
        code = self.process.returncode
        if code is None:
            return ExitStatus(exit_code=None, signal=None, reason=reason)
        if code < 0:
            return ExitStatus(exit_code=None, signal=-code, reason=reason)
        return ExitStatus(exit_code=code, signal=None, reason=reason)

    def reap(self) -> None:
        """After the Agent exited: end what it left running in its group, read stdout to EOF."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._reader.join(timeout=10.0)

    def stdout_since(self, offset: int) -> bytes:
        """The raw stdout kept from byte ``offset`` on (what the reader has read so far)."""
        return bytes(self._stdout[offset:])

    def outputs(self) -> tuple[bytes, bytes]:
        """stdout and stderr as kept, once the process has exited. The first call also
        delivers the error records a parser reads off stderr (a CLI that reports a failed
        run there only)."""
        self._reader.join(timeout=10.0)
        if self._outputs is None:
            self._stderr_file.seek(0)
            stderr = self._stderr_file.read(MAX_KEPT_BYTES)
            self._stderr_file.close()
            self._outputs = (bytes(self._stdout), stderr)
            read_stderr = getattr(self._parser, "stderr", None)
            if read_stderr is not None:
                with contextlib.suppress(Exception):  # a parser bug must not lose the exit
                    self._deliver(read_stderr(stderr.decode("utf-8", "replace")))
        return self._outputs
