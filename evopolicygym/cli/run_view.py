"""The live view of `run` and `resume`: a log of what the Run does, in the words of
``records.timeline``, above a status panel (phase, budget bar, best so far)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from evopolicygym.cli.output import clip, printable
from evopolicygym.records.events import (
    AgentStarted,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    ValidationStarted,
)
from evopolicygym.records.runs import RunSummary
from evopolicygym.records.timeline import event_text
from evopolicygym.run import RunState

__all__ = ["RunView"]

# Said otherwise or not at all while a Run goes on: its start and resumption (the command
# says them), each Submission's start and Episodes (its outcome is the line), an
# interruption (the command's one line says it).
_QUIET = (RunCreated, RunResumed, EvaluationStarted, EpisodeCompleted, RunInterrupted)


class RunView:
    """What a Run does, as it does it: one line per Submission, Validation and Assessment
    step (and the Agent's starts, exits and errors), printed as a log; on a terminal, a
    status panel below it (phase, budget bar, best so far) that stays put while the log
    scrolls above it (rich's Live: what the console prints goes above the panel)."""

    def __init__(self, console: Console, summary: RunSummary) -> None:
        self.console = console
        self.run_id = summary.run_id
        self._summary = summary  # what happened so far, as the Run read API folds it
        self._live: Live | None = None
        self._state: RunState | None = None
        self._phase = "interrupted" if summary.status == "interrupted" else "starting"

    def __enter__(self) -> RunView:
        if (
            self.console.is_terminal and not self._summary.finished
        ):  # an ended Run has nothing to show live
            self._live = Live(
                _Panel(self),
                console=self.console,
                refresh_per_second=4,
                transient=False,
                redirect_stdout=False,
            )
            self._live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._live is not None:
            if kind is not None and not issubclass(kind, KeyboardInterrupt):
                self._live.transient = True  # an error follows in one line: no panel left above it
            self._live.__exit__(None, None, None)

    def update(self, state: RunState, events: list[Event]) -> None:
        self._state = state
        for event in events:
            self._summary.apply(event)
            self._phase = self._next_phase(event)
            line = None if isinstance(event, _QUIET) else event_text(event, self._summary)
            if line:
                # Piped, one event stays one line (grep-able); a terminal folds at its width.
                piped = not self.console.is_terminal
                self.console.print(
                    Text(printable(line)),
                    overflow="ignore" if piped else "fold",
                    crop=not piped,
                    soft_wrap=piped,
                    highlight=False,
                )
        if self._live is not None:
            self._live.refresh()

    def _next_phase(self, event: Event) -> str:
        match event:
            case AgentStarted():
                return "agent"
            case ValidationStarted() | CandidateValidated():
                return "validation"
            case AssessmentStarted() | FinalSubmissionSelected():
                return "assessment"
            case RunFinished():
                return "finished" if event.reason == "finished" else f"ended: {event.reason}"
            case RunInterrupted():
                return "interrupted"
        return self._phase

    def panel_lines(self, width: int) -> list[str]:
        """The status panel at ``width`` columns: phase; budget bar; best so far."""
        state = self._state
        head = f"run {self.run_id}  {self._phase}"
        if state is None or not state.created:
            return [head]
        budget = state.cfg.episode_budget
        used = state.budget_used
        count = f" {used}/{budget} Episodes"
        bar_width = max(min(width - len("budget ") - len(count) - 2, 40), 5)
        filled = min(bar_width, bar_width * used // budget) if budget else bar_width
        bar = f"budget [{'#' * filled}{'.' * (bar_width - filled)}]{count}"
        summary = self._summary
        best = summary.best_score
        best_line = (
            "best so far: -"
            if best is None
            else f"best so far: {best:g} (submission {summary.best_submission_id})"
        )
        best_line += f"  submissions {len(state.submissions)}"
        return [clip(line, width) for line in (head, bar, best_line)]


class _Panel:
    """The live status panel, laid out at the console's width when it is drawn."""

    def __init__(self, view: RunView) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.view.panel_lines(options.max_width):
            yield Text(line, no_wrap=True, overflow="ellipsis")
