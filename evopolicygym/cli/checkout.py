"""``evopolicy record checkout``: write a Submission's Program into a directory."""

from __future__ import annotations

from pathlib import Path

import click

from evopolicygym.cli.errors import CliError, CliUsageError, emit_json, printable
from evopolicygym.program import ProgramError
from evopolicygym.records.blobs import BlobError
from evopolicygym.records.events import (
    EvaluationStarted,
    EventCodecError,
    FinalSubmissionSelected,
    RunCreated,
)

__all__ = ["checkout"]

_WANTED = frozenset({"RunCreated", "EvaluationStarted", "FinalSubmissionSelected"})


def _parse_submission(value: str) -> int | str:
    if value in ("initial", "final"):
        return value
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise CliUsageError(
        f"SUBMISSION must be a submission id (1, 2, ...), 'initial' or 'final', not {value!r}"
    )


def _check_target(directory: Path) -> None:
    if not directory.exists() and not directory.is_symlink():
        return
    if not directory.is_dir():
        raise CliError(f"{directory} exists and is not a directory")
    if any(directory.iterdir()):
        raise CliError(f"{directory} is not empty: check out into a new or empty directory")


@click.command(short_help="Write a Submission's Program into a directory.")
@click.argument("run", metavar="RUN")
@click.argument("submission", metavar="SUBMISSION")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.pass_context
def checkout(ctx: click.Context, run: str, submission: str, directory: Path, as_json: bool) -> None:
    """Write the Program of SUBMISSION of RUN (its id, or run-<id>) into DIR, which must
    not exist or be empty. SUBMISSION is a submission id, 'initial' (the Run's initial
    Program) or 'final' (the Submission selected as final)."""
    # Imported here: record.py registers this command at its end, so a module-level import
    # would be circular whichever module is imported first.
    from evopolicygym.cli.record import RUN_PREFIX, _open, _resolve_run

    wanted = _parse_submission(submission)
    _check_target(directory)
    with _open(ctx) as store:
        stream_id = _resolve_run(store, run)
        run_id = stream_id[len(RUN_PREFIX) :]
        initial: str | None = None
        final: FinalSubmissionSelected | None = None
        started: dict[int, str] = {}
        for envelope in store.events.read_stream(stream_id, 0):
            if envelope.type not in _WANTED:
                continue  # transcripts and the rest: not needed, so not decoded
            try:
                event = envelope.event()
            except EventCodecError:
                continue  # 'record verify' reports it; it names no Program we could use
            if isinstance(event, RunCreated):
                run_id, initial = event.run_id, event.initial_program_digest
            elif isinstance(event, EvaluationStarted):
                started.setdefault(event.submission_id, event.program_digest)
            elif isinstance(event, FinalSubmissionSelected):
                final = event
        label: int | str = wanted
        if wanted == "initial":
            if initial is None:
                raise CliError(f"run {run_id} has no RunCreated event, so no initial program")
            digest = initial
        elif wanted == "final":
            if final is None:
                raise CliError(f"run {run_id} has no final submission (none selected yet)")
            digest, label = final.program_digest, final.submission_id
        else:
            assert isinstance(wanted, int)
            if wanted not in started:
                known = f"it has 1 to {max(started)}" if started else "it has none yet"
                raise CliError(f"run {run_id} has no submission {wanted} ({known})")
            digest = started[wanted]
        try:
            program = store.blobs.get_program(digest)
        except BlobError as exc:
            raise CliError(f"cannot check out {digest}: {exc}") from exc
    try:
        program.write_to(directory)
    except (OSError, ProgramError) as exc:
        raise CliError(f"cannot write the program to {directory}: {exc}") from exc
    count = len(program.files)
    if as_json:
        emit_json(
            {
                "run_id": run_id,
                "submission": label,
                "program_digest": program.digest,
                "files": count,
                "directory": str(directory),
            }
        )
        return
    what = "initial program" if label == "initial" else f"submission {label}"
    click.echo(
        printable(
            f"wrote {what} of run {run_id} ({program.digest}, "
            f"{count} file{'s' if count != 1 else ''}) to {directory}"
        )
    )
