"""``evopolicy record replay``: a Run's timeline from its log, checked, optionally re-evaluated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.executors import check_executor, executor_options, open_evaluator
from evopolicygym.cli.options import RECORD_STORE_NOTE, store_option
from evopolicygym.cli.output import emit_json, printable
from evopolicygym.cli.stores import open_existing, resolve, run_status, store_root
from evopolicygym.records.runs import summarize
from evopolicygym.records.timeline import entry_text
from evopolicygym.run.replay import Replay, ReplayError, replay_run

if TYPE_CHECKING:  # re-evaluation imports NumPy and the Benchmarks: only --reevaluate pays for it
    from evopolicygym.run.reevaluation import Mismatch

__all__ = ["replay"]


def _print_timeline(result: Replay) -> None:
    rows = [(f"v{entry.version}", entry_text(entry)) for entry in result.timeline]
    vwidth = max((len(v) for v, _ in rows), default=0)
    for version, text in rows:
        # Recorded text is untrusted: one line, no terminal controls.
        click.echo(f"{version:>{vwidth}}  {printable(text, cell=True)}")


def _state(result: Replay) -> str:
    if result.status == "finished":
        return f"finished ({result.terminal_reason})"
    return result.status


def _summary(result: Replay) -> str:
    rejections = f"{result.rejections} rejection{'s' if result.rejections != 1 else ''}"
    budget = (
        f"budget {result.budget_used}/{result.episode_budget} used"
        if result.episode_budget is not None
        else f"{result.budget_used} Episodes used"
    )
    return (
        f"run {result.run_id}: {result.events} events, {_state(result)}; "
        f"{result.submissions} submissions ({result.published} published), {rejections}; {budget}"
    )


class _Bar:
    """A rich progress bar on stderr, counting re-run Episodes."""

    def __init__(self) -> None:
        console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("re-evaluating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # a log file gets the result, not the redraws
        )
        self.task = self.progress.add_task("re-evaluating", total=None)

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


@click.command(short_help="Replay a Run from its log: timeline, checks, re-evaluation.")
@click.argument("run", metavar="RUN")
@store_option(RECORD_STORE_NOTE)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
@click.option(
    "--reevaluate",
    "reevaluating",
    is_flag=True,
    help="Re-run every recorded score (Submissions, Validation, Assessment) and compare.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Evaluation processes for --reevaluate [default: the Run's setting].",
)
@executor_options
@click.pass_context
def replay(
    ctx: click.Context,
    run: str,
    store_dir: str | None,
    as_json: bool,
    reevaluating: bool,
    jobs: int | None,
    executor: str,
    ray_address: str | None,
) -> None:
    """Replay RUN (its id, run-<id>, `latest` or a unique prefix of an id) from the log:
    fold every event with the Run's rules, check its hash chain links and every blob and
    Program it names, and print its timeline.

    With --reevaluate, every published Submission, Validation and Assessment score is
    re-run on its recorded Episodes and compared exactly. Exit status 1 when the Run does
    not verify or a score does not reproduce. Host-private seeds are never printed.
    """
    mismatches: list[Mismatch] | None = None
    check_executor(executor, ray_address)
    if executor != "local" and not reevaluating:
        raise CliUsageError("--executor is only for --reevaluate (nothing else is played)")
    with open_existing(store_root(ctx, store_dir)) as store:
        stream_id = resolve(store, run)
        result = replay_run(store, stream_id)
        # --json says the Run's status as every command does (`record list`, `run`): its
        # terminal reason once it has ended; the timeline's words are for people.
        status = run_status(store, summarize(store.events, stream_id)) if as_json else result.status
        if reevaluating:
            from evopolicygym.run.reevaluation import reevaluate

            try:
                with open_evaluator(executor, ray_address) as evaluator, _Bar() as bar:
                    mismatches = reevaluate(
                        store, stream_id, jobs=jobs, progress=bar, evaluator=evaluator
                    )
            except ReplayError as exc:
                raise CliError(f"cannot re-evaluate run {result.run_id}: {exc}") from exc
    reasons = _reasons(result, mismatches)
    if as_json:
        view: dict[str, Any] = {"ok": not reasons, **msgspec.to_builtins(result), "status": status}
        if mismatches is not None:
            view["mismatches"] = msgspec.to_builtins(mismatches)
        emit_json(view)
        if reasons:
            ctx.exit(1)
        return
    _print_timeline(result)
    for problem in result.problems:
        click.echo(printable(f"problem: {problem.describe()}", cell=True))
    for mismatch in mismatches or []:
        click.echo(printable(f"mismatch: {mismatch.describe()}", cell=True))
    if reasons:
        raise CliError("; ".join(reasons))
    line = f"ok: {_summary(result)}"
    if mismatches is not None:
        line += "; every score reproduces"
    click.echo(printable(line, cell=True))


def _reasons(result: Replay, mismatches: list[Mismatch] | None) -> list[str]:
    run_id = result.run_id
    reasons: list[str] = []
    if result.problems:
        count = len(result.problems)
        reasons.append(
            f"run {run_id} does not verify: {count} problem{'s' if count != 1 else ''}, "
            f"first {result.problems[0].describe()}"
        )
    if mismatches:
        count = len(mismatches)
        reasons.append(
            f"{count} re-evaluation mismatch{'es' if count != 1 else ''} in run {run_id}, "
            f"first {mismatches[0].describe()}"
        )
    return [printable(reason, cell=True) for reason in reasons]
