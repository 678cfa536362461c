"""``evopolicy record checkout``: write a Submission's Program into a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.output import emit_json, printable
from evopolicygym.cli.stores import open_existing, resolve, store_root
from evopolicygym.program import ProgramError
from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.runs import program_of, summarize

__all__ = ["checkout"]


def _parse_submission(value: str) -> int | Literal["initial", "final"]:
    if value == "initial":
        return "initial"
    if value == "final":
        return "final"
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
    """Write the Program of SUBMISSION of RUN (its id, run-<id>, `latest` or a unique
    prefix of an id) into DIR, which must not exist or be empty. SUBMISSION is a submission
    id, 'initial' (the Run's initial Program) or 'final' (the Submission selected as final)."""
    wanted = _parse_submission(submission)
    _check_target(directory)
    with open_existing(store_root(ctx)) as store:
        summary = summarize(store.events, resolve(store, run))
        run_id = summary.run_id
        try:
            digest, label = program_of(summary, wanted)
        except LookupError as exc:
            raise CliError(str(exc)) from None
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
