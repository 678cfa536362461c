"""The Agent supervisor: one attempt of the Agent, from start to its recorded exit.

The Agent is started through the ``Launcher`` the Host was given, with its Session
served meanwhile; it is stopped on timeout or once its authority has closed. Its
messages are redacted as they arrive and flushed to the log in chunks, each with
the raw stream read since the previous one (whole lines only, so redaction never
sees a secret cut in two); its stdout and stderr are kept as blobs with its exit.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path

import msgspec

from evopolicygym.hostdirs import host_base, remove_tree
from evopolicygym.protocol import CLI_ENV, CLI_SHIM, SESSION_ENV, WORKSPACE_ENV, cli_shim
from evopolicygym.records.events import AgentExited, AgentMessages
from evopolicygym.records.store import MAX_EVENT_BYTES, EventTooLarge
from evopolicygym.run.decider import HOST_INTERRUPTED, AgentExit, RecordMessages, StartAgent
from evopolicygym.run.launcher import Launcher, Redaction, RunningAgent
from evopolicygym.run.ledger import Ledger, RunError, one_line
from evopolicygym.run.publisher import Publisher
from evopolicygym.run.session_server import Handler, SessionServer
from evopolicygym.transcript import Message, ToolCall, fault_line, offered_tools

__all__ = ["CHUNK_BYTES", "FLUSH_EVERY_S", "FLUSH_MESSAGES", "STOP_GRACE_S", "AgentSupervisor"]

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 2.0  # transcript chunks reach the log at least this often
FLUSH_MESSAGES = 64
# Encoded messages per transcript chunk (one AgentMessages event), at most: well under the
# store's event size limit. A message too large alone is clipped, with a marker; the raw
# stream blob kept with the chunk holds every byte of it.
CHUNK_BYTES = MAX_EVENT_BYTES // 2
_TEXT_CHARS = CHUNK_BYTES // 16  # of a clipped message's content or reasoning (escapes grow a char)
_ARGUMENT_BYTES = CHUNK_BYTES // 16  # of a clipped message's tool call arguments, encoded
STOP_GRACE_S = 30.0  # how long an Agent may linger after its session closed


class AgentSupervisor:
    """Runs the Agent's attempts of one Run; the transcript goes through ``flush``."""

    def __init__(self, ledger: Ledger, publisher: Publisher, launcher: Launcher) -> None:
        self._ledger = ledger
        self._publisher = publisher
        self._launcher = launcher
        self._redactor: Redaction | None = None
        self._pending_messages: list[Message] = []
        self._agent: RunningAgent | None = None
        self._raw_offset = 0  # of the running Agent's stdout, recorded with the last chunk
        self._raw_held = b""  # read but not yet recorded: an unfinished line or secret block
        self._agent_done = False
        self._last_flush = 0.0
        self._errors = 0  # error records of the running attempt
        self._last_error: str | None = None

    @property
    def redactor(self) -> Redaction:
        """The current attempt's redactor: what the Agent sends is recorded through it."""
        if self._redactor is None:
            raise RunError("internal: no Agent has been started")
        return self._redactor

    def run(self, serve: Handler) -> None:
        """One attempt: start the Agent with its Session served by ``serve``, supervise it,
        record its exit."""
        ledger = self._ledger
        created = ledger.created
        workspace, task_md = self._publisher.prepare()
        try:
            launch = self._launcher.launch(created.agent, task_md)
        except ValueError as exc:  # say, the command is gone from PATH since the Run began
            ledger.must(StartAgent(command=[], pid=None))
            ledger.must(
                AgentExit(exit_code=None, signal=None, reason=f"start_failed: {one_line(exc)}")
            )
            return
        self._redactor = redactor = self._launcher.redactor(created.agent)
        with SessionServer(serve) as server:
            env = dict(launch.env)
            env[SESSION_ENV] = server.path
            env[WORKSPACE_ENV] = str(workspace)
            env.setdefault(
                CLI_ENV, msgspec.json.encode([sys.executable, "-m", "evopolicygym.cli"]).decode()
            )
            try:
                _write_shim(workspace, msgspec.json.decode(env[CLI_ENV], type=list[str]))
            except (OSError, msgspec.ValidationError, msgspec.DecodeError) as exc:
                ledger.must(StartAgent(command=[], pid=None))
                ledger.must(
                    AgentExit(exit_code=None, signal=None, reason=f"start_failed: {one_line(exc)}")
                )
                return
            with ledger.lock:
                self._raw_held = b""
                self._errors, self._last_error = 0, None
                # The task opens every attempt's transcript; nothing is flushed before StartAgent.
                self._pending_messages = [
                    Message(role="system", content=task_md, at=time.time_ns())
                ]
                try:
                    agent = self._launcher.start(
                        list(launch.argv),
                        stream=launch.stream,
                        cwd=str(workspace),
                        env=env,
                        # The Agent must never reach the log, nor the Host's private channels
                        # (the fork server's socket) made now or later.
                        hide=[str(ledger.store.path.resolve()), host_base()],
                        on_message=self._queue_message,
                    )
                except OSError as exc:
                    self._pending_messages = []
                    ledger.must(StartAgent(command=redactor.value(launch.argv), pid=None))
                    ledger.must(
                        AgentExit(
                            exit_code=None, signal=None, reason=f"start_failed: {one_line(exc)}"
                        )
                    )
                    return
                ledger.must(
                    StartAgent(
                        command=redactor.value(launch.argv),
                        pid=agent.pid,
                        tools=offered_tools(created.agent),
                    )
                )
                self._agent, self._raw_offset = agent, 0
                self._last_flush = time.monotonic()
            reason = self._supervise(agent)
            agent.reap()  # its leftovers die with it; its stdout is read to the end
            if self._ledger.fault is not None:
                raise self._ledger.fault
        stdout, stderr = agent.outputs()  # and what it said on stderr is read for errors
        with ledger.lock:
            self._agent_done = True
        self.flush(force=True)
        self._record_session(stdout, stderr, env, str(workspace))
        with ledger.lock:
            self._agent, self._agent_done = None, False
        status = agent.status(reason)
        ledger.must(
            AgentExit(
                exit_code=status.exit_code,
                signal=status.signal,
                reason=status.reason,
                stdout_blob=ledger.store.blobs.put(redactor.bytes(stdout)),
                stderr_blob=ledger.store.blobs.put(redactor.bytes(stderr)),
                unknown_kinds=dict(agent.unknown_kinds),
                errors=self._errors,
                last_error=self._last_error,
            )
        )

    def recover_session(self, workspace: Path | None) -> None:
        """On resume: the session record of the attempt the Host died under, found by the
        output recorded of it (its chunks' raw stream), as an ended attempt's would be."""
        ledger = self._ledger
        state, events = ledger.state, ledger.events
        attempt = state.agent_attempts
        exits = [e for e in events if isinstance(e, AgentExited) and e.attempt == attempt]
        if workspace is None or not exits or exits[-1].reason != HOST_INTERRUPTED:
            return
        chunks = [e for e in events if isinstance(e, AgentMessages) and e.attempt == attempt]
        if any(e.source is not None for e in chunks):
            return
        try:
            stdout = b"".join(
                ledger.store.blobs.get(e.raw_blob) for e in chunks if e.raw_blob is not None
            )
            env = dict(self._launcher.launch(ledger.created.agent, "").env)
        except Exception as exc:  # a blob gone, its CLI gone: the Run goes on without that record
            log.warning(
                "could not recover the interrupted attempt's session record: %s",
                one_line(exc),
                exc_info=not isinstance(exc, ValueError),  # a launcher's refusal says it all
            )
            return
        self._redactor = self._launcher.redactor(ledger.created.agent)
        self._record_session(stdout, b"", env, str(workspace))

    def _record_session(
        self, stdout: bytes, stderr: bytes, env: dict[str, str], workspace: str
    ) -> None:
        """The attempt's transcript from its CLI's own session record, where it keeps one.
        The record is the Agent's to write, so it is read as untrusted input: bounded,
        redacted, and never able to stop the Run."""
        ledger = self._ledger
        try:
            record = self._launcher.session_record(
                ledger.created.agent, stdout, stderr, env, workspace
            )
        except Exception:  # a CLI's record in a shape we do not know: the stream stands
            log.warning("could not read the Agent's session record", exc_info=True)
            return
        if record is None:
            return
        redactor = self.redactor
        messages = [_clipped(redactor.message(m)) for m in record.messages]
        raw_blob = ledger.store.blobs.put(redactor.bytes(record.raw))
        try:
            ledger.must(
                RecordMessages(
                    messages=messages, raw_blob=raw_blob, source=record.source, tools=record.tools
                )
            )
        except EventTooLarge as exc:  # the whole record is one event: too long a session
            log.warning("the Agent's session record is not recorded (the stream stands): %s", exc)

    def _supervise(self, agent: RunningAgent) -> str:
        """Wait for the Agent; stop it on timeout or once its session has closed."""
        config = self._ledger.state.cfg
        deadline = agent.started + config.agent_timeout
        closed_at: float | None = None
        try:
            while True:
                if self._ledger.fault is not None:  # the store failed under the Session's thread
                    raise self._ledger.fault
                if agent.wait(0.25) is not None:
                    return "exited"
                self.flush()
                now = time.monotonic()
                if now >= deadline:
                    agent.stop()
                    return "timeout"
                if not self._ledger.state.authority_open:
                    closed_at = closed_at or now
                    if now - closed_at >= STOP_GRACE_S:
                        agent.stop()
                        return "stopped"
        except BaseException:
            agent.stop(grace=1.0)
            raise

    def drain(self) -> None:
        """Before a session request's events: what the running Agent's parser holds back is
        queued, so the call that made the request is recorded first (called without the
        ledger's lock: delivering a message takes it)."""
        agent = self._agent
        if agent is not None:
            agent.drain()

    def _queue_message(self, message: Message) -> None:
        redacted = self.redactor.message(message)  # before anything of it is recorded
        with self._ledger.lock:
            self._pending_messages.append(redacted)
            if redacted.role == "error":
                self._errors += 1
                self._last_error = fault_line(redacted)

    def flush(self, force: bool = False) -> None:
        """Record the messages received so far (when due, or ``force``) with their raw stream."""
        ledger = self._ledger
        with ledger.lock:
            if not self._pending_messages:
                return
            due = (
                force
                or len(self._pending_messages) >= FLUSH_MESSAGES
                or time.monotonic() - self._last_flush >= FLUSH_EVERY_S
            )
            if not due:
                return
            messages, self._pending_messages = self._pending_messages, []
            self._last_flush = time.monotonic()
            raw_blob = None
            if self._agent is not None:  # the raw stream since the last chunk, kept with it
                fresh = self._agent.stdout_since(self._raw_offset)
                self._raw_offset += len(fresh)
                raw, self._raw_held = _whole_lines(self._raw_held + fresh, final=self._agent_done)
                raw_blob = ledger.store.blobs.put(self.redactor.bytes(raw)) if raw else None
            for i, chunk in enumerate(_chunks(messages)):  # the raw stream with the first
                ledger.must(RecordMessages(messages=chunk, raw_blob=raw_blob if i == 0 else None))


_ENCODE = msgspec.json.Encoder()


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= _TEXT_CHARS:
        return text
    return f"{text[:_TEXT_CHARS]} … [{len(text) - _TEXT_CHARS} more characters cut]"


def _clipped(message: Message) -> Message:
    """``message`` as a transcript chunk can hold it: unchanged unless its encoding is over
    ``CHUNK_BYTES``; then its texts are cut with a marker and any tool call's arguments over
    ``_ARGUMENT_BYTES`` are replaced by their size."""
    if len(_ENCODE.encode(message)) <= CHUNK_BYTES:
        return message
    content, reasoning = _clip(message.content) or "", _clip(message.reasoning)
    size = len(
        _ENCODE.encode(
            msgspec.structs.replace(message, content=content, reasoning=reasoning, tool_calls=[])
        )
    )
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        if len(encoded := _ENCODE.encode(call.arguments)) > _ARGUMENT_BYTES:
            call = msgspec.structs.replace(call, arguments={"truncated_bytes": len(encoded)})
        size += len(_ENCODE.encode(call)) + 1
        if size > CHUNK_BYTES:  # pathological: more calls than a chunk holds
            content += f" [{len(message.tool_calls) - len(calls)} tool calls cut]"
            break
        calls.append(call)
    return msgspec.structs.replace(message, content=content, reasoning=reasoning, tool_calls=calls)


def _chunks(messages: list[Message]) -> list[list[Message]]:
    """``messages`` in order, in as few chunks as keep each under ``CHUNK_BYTES`` encoded."""
    chunks: list[list[Message]] = [[]]
    size = 0
    for message in map(_clipped, messages):
        length = len(_ENCODE.encode(message)) + 1
        if chunks[-1] and size + length > CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(message)
        size += length
    return chunks


def _write_shim(workspace: Path, cli: list[str]) -> None:
    """``./evopolicy`` in the workspace root, replaced whole: whatever the Agent left there,
    the session command of this attempt is the Host's."""
    shim = workspace / CLI_SHIM
    fresh = workspace / f".{CLI_SHIM}.new"
    if fresh.is_dir() and not fresh.is_symlink():
        remove_tree(fresh)
    fresh.unlink(missing_ok=True)
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755)
    with os.fdopen(fd, "wb") as out:
        out.write(cli_shim(cli))
    if shim.is_dir() and not shim.is_symlink():
        remove_tree(shim)
    os.replace(fresh, shim)


_PEM_BEGIN = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(rb"-----END [A-Z0-9 ]*PRIVATE KEY-----")


def _whole_lines(data: bytes, *, final: bool) -> tuple[bytes, bytes]:
    """(what may be recorded now, what to hold): whole lines only, and nothing from an
    unclosed private-key block on, so redaction never sees a secret cut in two."""
    if final:
        return data, b""
    cut = data.rfind(b"\n") + 1
    begins = list(_PEM_BEGIN.finditer(data, 0, cut))
    if begins and not _PEM_END.search(data, begins[-1].end(), cut):
        cut = data.rfind(b"\n", 0, begins[-1].start()) + 1
    return data[:cut], data[cut:]
