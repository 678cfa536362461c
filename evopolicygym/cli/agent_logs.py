"""``evopolicy record logs``: what a Run's Agent printed, from the store."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.output import emit_json, printable
from evopolicygym.cli.stores import open_existing, resolve, store_root
from evopolicygym.records.agent_output import AgentAttempt, Stream, read_agent_attempts
from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.events import EventCodecError
from evopolicygym.records.runs import run_id_of

__all__ = ["logs", "terminal_text"]


def terminal_text(data: bytes) -> str:
    """Recorded output as text a terminal shows and cannot be driven by: UTF-8 (an invalid
    byte becomes U+FFFD), line ends as newlines, other control characters as \\xNN."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    return printable(text)


def _ended(attempt: AgentAttempt) -> str:
    exited = attempt.exited
    if exited is None:
        return "no exit recorded"
    if exited.signal is not None:
        return f"{exited.reason or 'ended'}, signal {exited.signal}"
    if exited.exit_code is not None:
        return f"{exited.reason or 'ended'}, code {exited.exit_code}"
    return exited.reason or "ended"


def _verify(run_id: str) -> str:
    return f"see `{cli_command('record', 'verify', run_id)}`"


def _pick(attempts: list[AgentAttempt], wanted: int | None, run_id: str) -> AgentAttempt:
    if not attempts:
        raise CliError(f"run {run_id} recorded no Agent output: its Agent never started")
    if wanted is None:
        return attempts[-1]
    for attempt in attempts:
        if attempt.attempt == wanted:
            return attempt
    have = attempts[-1].attempt
    span = "1 Agent attempt" if have == 1 else f"{have} Agent attempts (1 to {have})"
    raise CliError(f"--attempt {wanted}: run {run_id} has {span}")


@click.command(short_help="Print what a Run's Agent wrote on stdout and stderr.")
@click.argument("run", metavar="RUN")
@click.option(
    "--attempt",
    type=click.IntRange(min=1),
    metavar="N",
    default=None,
    help="Which start of the Agent: 1 is the first; each resume of a Run whose Host was "
    "interrupted under its Agent starts the next. [default: the last]",
)
@click.option(
    "--stdout", "only_stdout", is_flag=True, help="Only the Agent's stdout, without a header."
)
@click.option(
    "--stderr", "only_stderr", is_flag=True, help="Only the Agent's stderr, without a header."
)
@click.option(
    "--raw",
    is_flag=True,
    help="Write the recorded bytes to stdout exactly: no decoding, no headers "
    "(without --stdout or --stderr: stdout's bytes, then stderr's).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object: the attempt, how it ended, and each stream as UTF-8 text "
    "(null when not recorded).",
)
@click.pass_context
def logs(
    ctx: click.Context,
    run: str,
    attempt: int | None,
    only_stdout: bool,
    only_stderr: bool,
    raw: bool,
    as_json: bool,
) -> None:
    """Print what the Agent of RUN (its id, run-<id>, `latest` or a unique prefix of an
    id) wrote on stdout and stderr, as recorded (secrets the Host knows are redacted before
    anything is stored).

    The record keeps the two streams apart, not interleaved: without --stdout or --stderr
    both are printed, stdout first, each under a line such as
    "==> stdout (attempt 1, exited, code 3) <==". Text is decoded as UTF-8 and control
    characters are shown as \\xNN; --raw writes the bytes.
    An attempt the Host was interrupted under kept its streamed stdout but not its stderr.

    Exit status 1 when the Run or the attempt is not in the store, or the chosen streams
    hold nothing (not recorded, or the Agent printed nothing there).
    """
    if only_stdout and only_stderr:
        raise CliUsageError("--stdout and --stderr exclude each other (give neither for both)")
    if raw and as_json:
        raise CliUsageError("--raw and --json exclude each other")
    streams: tuple[Stream, ...] = (
        ("stdout",) if only_stdout else ("stderr",) if only_stderr else ("stdout", "stderr")
    )
    with open_existing(store_root(ctx)) as store:
        stream_id = resolve(store, run)
        run_id = run_id_of(stream_id) or stream_id
        try:
            attempts = read_agent_attempts(store.events, stream_id)
        except EventCodecError as exc:
            raise CliError(
                f"run {run_id}: an Agent event does not decode ({exc}); {_verify(run_id)}"
            ) from exc
        chosen = _pick(attempts, attempt, run_id)
        outputs: dict[Stream, bytes | None] = {}
        for stream in streams:
            try:
                outputs[stream] = chosen.output(store.blobs, stream)
            except BlobError as exc:
                raise CliError(
                    f"run {run_id}, attempt {chosen.attempt}: its {stream} blob cannot be read "
                    f"({exc}); {_verify(run_id)}"
                ) from exc
    _check_something(outputs, chosen, run_id)
    try:
        _write(outputs, chosen, attempts, run_id, raw=raw, as_json=as_json)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and let exit not flush again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        ctx.exit(0)


def _write(
    outputs: dict[Stream, bytes | None],
    chosen: AgentAttempt,
    attempts: list[AgentAttempt],
    run_id: str,
    *,
    raw: bool,
    as_json: bool,
) -> None:
    """What the command prints, once there is something to print."""
    if raw:
        out = sys.stdout.buffer
        for data in outputs.values():
            out.write(data or b"")
        out.flush()
        return
    if as_json:
        view: dict[str, Any] = {
            "run_id": run_id,
            "attempt": chosen.attempt,
            "attempts": attempts[-1].attempt,
            "reason": chosen.exited.reason if chosen.exited is not None else None,
            "exit_code": chosen.exited.exit_code if chosen.exited is not None else None,
            "signal": chosen.exited.signal if chosen.exited is not None else None,
        }
        for stream, data in outputs.items():
            view[stream] = data.decode("utf-8", "replace") if data is not None else None
        emit_json(view)
        return
    of = (
        f"attempt {chosen.attempt} of {attempts[-1].attempt}"
        if len(attempts) > 1
        else f"attempt {chosen.attempt}"
    )
    for stream, data in outputs.items():
        if len(outputs) > 1:
            click.echo(f"==> {stream} ({of}, {_ended(chosen)}) <==")
        if data is None:
            click.echo(f"(not recorded: {chosen.unrecorded(stream)})")
        elif not data:
            click.echo("(empty)")
        else:
            text = terminal_text(data)
            click.echo(text, nl=not text.endswith("\n"))


def _check_something(
    outputs: dict[Stream, bytes | None], chosen: AgentAttempt, run_id: str
) -> None:
    """One line and exit 1 when the chosen streams hold nothing: a script should not take an
    empty print for the Agent's output."""
    if any(outputs.values()):
        return
    where = f"run {run_id}, attempt {chosen.attempt}"
    names = " or ".join(outputs)
    missing = [stream for stream, data in outputs.items() if data is None]
    if len(missing) == len(outputs):
        raise CliError(f"{where}: no {names} recorded: {chosen.unrecorded(missing[0])}")
    if missing:
        raise CliError(
            f"{where}: the Agent printed nothing on "
            f"{' or '.join(s for s in outputs if s not in missing)}, "
            f"and its {' or '.join(missing)} was not recorded: {chosen.unrecorded(missing[0])}"
        )
    raise CliError(f"{where}: the Agent printed nothing on {names} ({_ended(chosen)})")
