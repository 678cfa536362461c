"""How `run`, `resume` and `quickstart` end: the exit status of each terminal reason, the
outcome printed on stdout, and why the Agent failed where it did."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.output import human, one_line
from evopolicygym.cli.signals import EXIT_INTERRUPTED
from evopolicygym.records.events import Event, RunCreated
from evopolicygym.records.location import Store
from evopolicygym.records.runs import RunSummary

__all__ = [
    "AGENT_STDERR_LINES",
    "EXIT_AGENT",
    "EXIT_HELP",
    "EXIT_HOST_FAULT",
    "exit_status",
    "outcome_of",
    "print_agent_failure",
    "print_outcome",
    "resume_command",
]

# Exit statuses of `run`, `resume` and `quickstart` by how the Run ended (README, `run --help`):
# 0 only for a Run that finished; 1 an error before or around the Run; 2 a usage error.
EXIT_AGENT = 3  # agent_failed, agent_exited, budget_exhausted: the Agent handed nothing off
EXIT_HOST_FAULT = 4  # evaluation_failed, validation_failed, assessment_failed
_EXIT_STATUS = {
    "finished": 0,
    "agent_failed": EXIT_AGENT,
    "agent_exited": EXIT_AGENT,
    "budget_exhausted": EXIT_AGENT,
    "evaluation_failed": EXIT_HOST_FAULT,
    "validation_failed": EXIT_HOST_FAULT,
    "assessment_failed": EXIT_HOST_FAULT,
    "interrupted": EXIT_INTERRUPTED,
}
EXIT_HELP = """\b
Exit status:
  0    the Run finished (the Agent handed off candidates)
  1    an error before or around the Run (one line on stderr)
  2    a usage error
  3    the Agent handed nothing off (agent_failed, agent_exited, budget_exhausted)
  4    a Host evaluation failed (evaluation_failed, validation_failed, assessment_failed)
  130  interrupted by Ctrl-C or SIGTERM; `evopolicy resume RUN` carries it on
The same with --json."""


def exit_status(reason: str | None) -> int:
    """The documented exit status of a Run that ended for ``reason``."""
    return 0 if reason is None else _EXIT_STATUS.get(reason, 1)


AGENT_STDERR_LINES = 10  # of a failed Agent's stderr, printed when its Run ends


def print_agent_failure(store: Store, events: list[Event]) -> None:
    """Why the Agent failed, from the record: its last error and the end of its stderr
    (read as ``record logs`` reads it, which prints all of it)."""
    from evopolicygym.cli.agent_logs import terminal_text
    from evopolicygym.records.agent_output import agent_attempts

    attempts = agent_attempts(events)
    last = attempts[-1] if attempts else None
    if last is None or last.exited is None:
        return
    if last.exited.last_error:
        click.echo(f"agent error: {one_line(last.exited.last_error)}", err=True)
    try:
        stderr = last.output(store.blobs, "stderr")
    except Exception:  # a blob gone: the outcome stands without it
        return
    text = terminal_text(stderr or b"")
    lines = [line.rstrip() for line in text.splitlines() if line.strip()][-AGENT_STDERR_LINES:]
    if lines:
        click.echo(f"the Agent's last stderr lines (attempt {last.attempt}):", err=True)
        for line in lines:
            click.echo(f"  {line}", err=True)
        run_id = next((event.run_id for event in events if isinstance(event, RunCreated)), None)
        if run_id is not None:
            click.echo(f"all of its output: {cli_command('record', 'logs', run_id)}", err=True)


def resume_command(store_dir: str | None, run_id: str) -> str:
    """The command that carries ``run_id`` on, with the store it was given."""
    return cli_command("resume", run_id, store=store_dir)


def outcome_of(summary: RunSummary) -> dict[str, Any]:
    """The public outcome of a Run (no Host-private seeds)."""
    first = summary.first_published
    return {
        "run_id": summary.run_id,
        "benchmark_id": summary.benchmark_id,
        "status": summary.status,
        "terminal_reason": summary.terminal_reason,
        "budget_used": summary.budget_used,
        "episode_budget": summary.episode_budget,
        "submissions": summary.started,
        "rejections": summary.rejections,
        "first_score": first.score if first is not None else None,
        "best_train_score": summary.best_score,
        "best_submission_id": summary.best_submission_id,
        "final_submission_id": summary.final_submission_id,
        "validation_score": summary.final_score if summary.validation_enabled else None,
        "assessment_score": summary.assessment_score,
        "handoff": summary.handoff,
        "reference_score": summary.reference_score,
        "improved": summary.improved,
        "success": summary.success,
    }


def print_outcome(console: Console, outcome: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    for key, value in outcome.items():
        if key == "terminal_reason" and value == outcome["status"]:
            continue  # said once: the status of an ended Run is its terminal reason
        shown = "not measured" if key == "improved" and value is None else human(value)
        table.add_row(key.replace("_", " "), shown)
    console.print(table)
    console.print(
        f"replay it: {cli_command('record', 'replay', outcome['run_id'])}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
