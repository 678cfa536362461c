"""``evopolicy run`` and ``evopolicy resume``: carry a Run with a live view of its progress."""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.table import Table
from rich.text import Text

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import PROVIDERS, AgentError, agent_identity
from evopolicygym.cli.errors import CliError, name_options
from evopolicygym.cli.executors import check_executor, executor_options, open_evaluator
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.loading import load
from evopolicygym.cli.options import finite, not_empty, param_option, store_option
from evopolicygym.cli.output import clip, emit_json, human, one_line, printable
from evopolicygym.cli.signals import EXIT_INTERRUPTED, interruptible
from evopolicygym.cli.stores import check_store_dir, open_existing, resolve
from evopolicygym.program import Program, ProgramError
from evopolicygym.protocol import CLI_SHIM
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    EvaluationFailed,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    FinishRejected,
    ReferenceValidated,
    RunFinished,
    RunInterrupted,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.records.location import Store, open_store, resolve_store
from evopolicygym.records.runs import RunSummary, run_id_of, run_stream_id, summarize
from evopolicygym.records.store import StoreError
from evopolicygym.run import (
    AssessmentConfig,
    RunBusy,
    RunConfig,
    RunConfigError,
    RunError,
    RunHost,
    RunState,
    ValidationConfig,
    create_run,
)
from evopolicygym.run.config import MAX_EPISODES, MAX_TRACE_STEPS, FeedbackConfig
from evopolicygym.run.gateway import program_problem
from evopolicygym.run.skills import SKILLS_DIR, SkillError, load_skill
from evopolicygym.run.workspace import ANALYSIS_DIR, FEEDBACK_DIR, PROGRAM_DIR, TASK_JSON, TASK_MD
from evopolicygym.transcript import fault_line

if TYPE_CHECKING:
    from evopolicygym.evaluation import Evaluator

__all__ = ["carry", "resume", "run"]

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
_EXIT_HELP = """\b
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


# RunConfig's field names as `run` spells them, for its errors (longest first).
_OPTION_NAMES = (
    (
        "train, validation and assessment splits",
        "--train-split, --validation-split and --assessment-split",
    ),
    ("max_episodes_per_submission", "--max-episodes-per-submission"),
    ("validation episodes_per_candidate", "--validation-episodes"),
    ("validation max_candidates", "--max-candidates"),
    ("bulk_feedback_retention_bytes", "--retention-bytes"),
    ("feedback trace_steps", "--feedback-trace-steps"),
    ("feedback traces", "--feedback-traces"),
    ("record_trajectories", "--record-trajectories"),
    ("require_budget_exhaustion", "--finish-policy require_budget_exhaustion"),
    ("assessment episodes", "--assessment-episodes"),
    ("max_agent_attempts", "--max-agent-attempts"),
    ("episode_pool_size", "--pool-size"),
    ("max_submissions", "--max-submissions"),
    ("episode_timeout", "--episode-timeout"),
    ("agent_timeout", "--agent-timeout"),
    ("episode_budget", "--budget"),
    ("the pool size", "--pool-size"),
)


def _command_line(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--agent-command`` must split as a shell would (balanced quotes)."""
    import shlex

    if value is not None:
        try:
            shlex.split(value)
        except ValueError as exc:
            raise click.BadParameter(
                f"{value!r} does not split into words ({exc})", ctx, param
            ) from exc
    return value


def _feedback_traces(ctx: click.Context, param: click.Parameter, value: str) -> int | str:
    """``--feedback-traces``: benchmark, all, or a count of Episodes."""
    word = value.strip().lower()
    if word in ("benchmark", "all"):
        return word
    try:
        count = int(word)
    except ValueError:
        count = -1
    if not 0 <= count <= MAX_EPISODES:
        raise click.BadParameter(
            f"{value!r} is not benchmark, all, or a number from 0 to {MAX_EPISODES:,}", ctx, param
        )
    return count


def _variable_names(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """``--agent-env`` takes the names of variables the Agent inherits, not NAME=VALUE."""
    for name in values:
        if not name.isidentifier() or not name.isascii():
            raise click.BadParameter(
                f"{name!r} is not an environment variable name (give NAME: the Agent inherits its value)",
                ctx,
                param,
            )
    return values


@click.command(short_help="Run an Agent on a Benchmark under an Episode budget.")
@click.option("--benchmark", "benchmark_ref", required=True, metavar="ID", help="Benchmark id.")
@param_option
@click.option(
    "--agent",
    type=click.Choice(list(PROVIDERS)),
    default="reference",
    show_default=True,
    help="Agent provider (see `evopolicy agents list`).",
)
@click.option(
    "--model",
    metavar="NAME",
    default=None,
    help="Model of the chat, codex, claude-code, kimi or qoder Agent.",
)
@click.option(
    "--effort",
    metavar="LEVEL",
    default=None,
    help="Reasoning effort (codex): minimal, low, medium, high or xhigh [default: the CLI's own].",
)
@click.option(
    "--base-url",
    metavar="URL",
    default=None,
    help="OpenAI-compatible endpoint of the chat Agent (e.g. http://127.0.0.1:8000/v1).",
)
@click.option(
    "--api-key-env",
    metavar="NAME",
    default=None,
    help="Variable holding the chat Agent's API key [default: OPENAI_API_KEY].",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=None,
    help="Model calls of the chat Agent [default: 60].",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens (prompt + completion) of the chat Agent [default: 2,000,000].",
)
@click.option(
    "--skill",
    "skill_dirs",
    multiple=True,
    metavar="DIR",
    help="Skill directory (with a SKILL.md) given to the Agent read-only (repeatable).",
)
@click.option(
    "--agent-command",
    metavar="CMD",
    default=None,
    callback=_command_line,
    help="Command line of a command Agent.",
)
@click.option(
    "--agent-seed", type=int, default=0, show_default=True, help="Seed of the reference Agent."
)
@click.option(
    "--agent-env",
    multiple=True,
    metavar="NAME",
    callback=_variable_names,
    help="Environment variable the Agent inherits (repeatable).",
)
@click.option(
    "--program",
    "program_dir",
    metavar="DIR",
    default=None,
    callback=not_empty,
    help="Initial program [default: the Benchmark's baseline].",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1, max=MAX_EPISODES),
    default=64,
    show_default=True,
    help="Episode budget: Episodes the Agent may spend on submissions.",
)
@click.option(
    "--pool-size",
    type=click.IntRange(min=1, max=MAX_EPISODES),
    default=None,
    help="Episodes in the Run-local pool the Agent selects from [default: the budget].",
)
@click.option(
    "--max-submissions",
    type=click.IntRange(min=1),
    default=None,
    help="Submissions the Agent may make [default: the budget].",
)
@click.option(
    "--max-episodes-per-submission",
    type=click.IntRange(min=1),
    default=None,
    help="Episodes one Submission may select, 1 to the pool size [default: the pool size].",
)
@click.option(
    "--finish-policy",
    type=click.Choice(["allow_early", "require_budget_exhaustion"]),
    default="allow_early",
    show_default=True,
    help="allow_early: the Agent may finish with budget left; require_budget_exhaustion: "
    "only once the budget is spent (--max-submissions x --max-episodes-per-submission must reach it).",
)
@click.option(
    "--validation-episodes",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Hidden Episodes each candidate is validated on.",
)
@click.option(
    "--max-candidates",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="Candidates the Agent may name when it finishes.",
)
@click.option("--no-validation", is_flag=True, help="Take the Agent's first candidate as final.")
@click.option(
    "--host-nomination",
    is_flag=True,
    help="When the Agent exits without an accepted finish, validate its best published Submissions "
    "anyway (recorded as handoff: host; such a Run is never a success). Default: no final program.",
)
@click.option(
    "--assessment-episodes",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Held-out Episodes the final program is assessed on.",
)
@click.option(
    "--no-assessment", is_flag=True, help="Do not measure the final program on held-out Episodes."
)
@click.option(
    "--assess-candidates",
    is_flag=True,
    help="Also assess every other validated candidate on the same held-out Episodes (a study of selection validity; the selection is unchanged).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**63 - 1),
    default=0,
    show_default=True,
    help="Run seed (Host-private).",
)
@click.option(
    "--episode-timeout",
    type=click.FloatRange(min=0, max=86_400, min_open=True),
    callback=finite,
    default=30.0,
    show_default=True,
    help="Seconds of policy time per Episode, start-up plus every act(); past it the Episode fails as a timeout.",
)
@click.option(
    "--agent-timeout",
    type=click.FloatRange(min=0, max=30 * 86_400, min_open=True),
    callback=finite,
    default=3600.0,
    show_default=True,
    help="Wall-clock seconds each Agent attempt may run before it is stopped (2592000 is 30 days).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel Episodes [default: CPUs; with --executor ray, the cluster's].",
)
@click.option(
    "--max-agent-attempts",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="Agent starts, counting restarts on resume.",
)
@click.option(
    "--retention-bytes",
    type=click.IntRange(min=0),
    default=64 * 1024 * 1024,
    show_default=True,
    help="Bytes of bulk feedback artifacts (traces) kept in the workspace; the newest is always kept.",
)
@click.option(
    "--train-split",
    default="train",
    show_default=True,
    help="Split of the Episode pool; the three splits must differ.",
)
@click.option(
    "--validation-split",
    default="validation",
    show_default=True,
    help="Split of the validation Episodes (hidden from the Agent).",
)
@click.option(
    "--assessment-split",
    default="assessment",
    show_default=True,
    help="Split of the held-out assessment Episodes.",
)
@click.option(
    "--record-trajectories",
    type=click.Choice(["none", "train", "all"]),
    default="train",
    show_default=True,
    help="Keep per-step traces of which Episodes.",
)
@click.option(
    "--feedback-traces",
    metavar="benchmark|all|N",
    default="benchmark",
    show_default=True,
    callback=_feedback_traces,
    help="Episode traces each Submission's Feedback shows the Agent. benchmark: the Benchmark's own "
    "trace artifact (a Gymnasium task's: its first 3 Episodes, 200 steps each); N (0 to "
    f"{MAX_EPISODES:,}): the Host's recorded trace of the Submission's first N Episodes instead, "
    "one file each (0: no trace); all: of every Episode. N and all need --record-trajectories train or all.",
)
@click.option(
    "--feedback-trace-steps",
    type=click.IntRange(min=1, max=MAX_TRACE_STEPS),
    default=None,
    help=f"Steps of each Host trace the Feedback shows, 1 to {MAX_TRACE_STEPS:,} "
    "[default: all recorded]; only with --feedback-traces N or all.",
)
@click.option(
    "--no-feedback-episodes",
    is_flag=True,
    help="Leave the per-Episode rows (status, return, steps, failure, output tail) out of each "
    "Submission's Feedback; its score, failure count and budget stay.",
)
@click.option(
    "--no-feedback-content",
    is_flag=True,
    help="Leave the Benchmark's public content (its summaries and per-Episode details) out of each "
    "Submission's Feedback; its score, failure count and budget stay.",
)
@click.option(
    "--workspace",
    "workspace_dir",
    metavar="DIR",
    default=None,
    callback=not_empty,
    help="Agent workspace [default: a temporary directory, removed at the end].",
)
@click.option(
    "--allow-uncontained-agent",
    "allow_uncontained",
    is_flag=True,
    help="Where the Agent's jail cannot be set up (no user namespaces), run the Agent as the Host's user anyway; recorded in the Run.",
)
@executor_options
@store_option("; created if missing")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def run(
    benchmark_ref: str,
    params: dict[str, str],
    agent: str,
    model: str | None,
    effort: str | None,
    base_url: str | None,
    api_key_env: str | None,
    max_turns: int | None,
    max_tokens: int | None,
    skill_dirs: tuple[str, ...],
    agent_command: str | None,
    agent_seed: int,
    agent_env: tuple[str, ...],
    program_dir: str | None,
    budget: int,
    pool_size: int | None,
    max_submissions: int | None,
    max_episodes_per_submission: int | None,
    finish_policy: str,
    validation_episodes: int,
    max_candidates: int,
    no_validation: bool,
    host_nomination: bool,
    assessment_episodes: int,
    no_assessment: bool,
    assess_candidates: bool,
    seed: int,
    episode_timeout: float,
    agent_timeout: float,
    jobs: int | None,
    max_agent_attempts: int,
    retention_bytes: int,
    train_split: str,
    validation_split: str,
    assessment_split: str,
    record_trajectories: str,
    feedback_traces: int | str,
    feedback_trace_steps: int | None,
    no_feedback_episodes: bool,
    no_feedback_content: bool,
    workspace_dir: str | None,
    allow_uncontained: bool,
    executor: str,
    ray_address: str | None,
    store_dir: str | None,
    as_json: bool,
) -> None:
    """Run an Agent on a Benchmark: it edits a policy program, submits it on Episodes of
    a Run-local pool through `evopolicy session`, reads the feedback and finishes with
    candidates; the Host validates them on hidden Episodes and assesses the winner on
    held-out ones. Everything is recorded in the store.

    \b
    Example:
      evopolicy run --benchmark cartpole --agent reference --budget 64
      evopolicy run --benchmark cartpole --agent command --agent-command 'my-agent --fast'
      evopolicy run --benchmark cartpole --agent codex --model gpt-5-codex --effort high
      evopolicy run --benchmark cartpole --agent chat --base-url http://127.0.0.1:8000/v1 --model my-model
      evopolicy run --benchmark cartpole --agent claude-code --skill ./skills/control
      evopolicy run --benchmark cartpole --agent reference --executor ray --ray-address head:6379
    """
    check_executor(executor, ray_address)
    try:
        config = RunConfig(
            benchmark_params=dict(params),
            episode_budget=budget,
            episode_pool_size=pool_size,
            max_submissions=max_submissions,
            max_episodes_per_submission=max_episodes_per_submission,
            finish_budget_policy=finish_policy,  # type: ignore[arg-type]
            train_split=train_split,
            validation=ValidationConfig(
                enabled=not no_validation,
                episodes_per_candidate=validation_episodes,
                split=validation_split,
                max_candidates=max_candidates,
            ),
            assessment=AssessmentConfig(
                enabled=not no_assessment,
                episodes=assessment_episodes,
                split=assessment_split,
                candidates=assess_candidates,
            ),
            seed=seed,
            episode_timeout=episode_timeout,
            agent_timeout=agent_timeout,
            jobs=jobs,
            max_agent_attempts=max_agent_attempts,
            bulk_feedback_retention_bytes=retention_bytes,
            record_trajectories=record_trajectories,  # type: ignore[arg-type]
            host_nomination=host_nomination,
            feedback=FeedbackConfig(
                traces=feedback_traces,  # type: ignore[arg-type]
                trace_steps=feedback_trace_steps,
                episodes=not no_feedback_episodes,
                content=not no_feedback_content,
            ),
        ).resolved()
        identity = agent_identity(
            agent,
            command=agent_command,
            seed=agent_seed,
            env=agent_env,
            model=model,
            effort=effort,
            base_url=base_url,
            api_key_env=api_key_env,
            max_turns=max_turns,
            max_tokens=max_tokens,
        )
        program = Program.from_directory(program_dir) if program_dir else None
        problem = program_problem(program) if program is not None else None
        if problem is not None:  # refused now, not as the Agent's first program_invalid
            raise CliError(f"--program {program_dir}: {problem}")
        skills = [load_skill(directory) for directory in skill_dirs]
        launcher = ProviderLauncher(allow_uncontained=allow_uncontained)
        containment = launcher.containment()  # before anything is recorded: fail closed
        check_store_dir(store_dir)
        if agent == "chat":
            _check_chat(base_url, api_key_env)
        load(
            benchmark_ref, params
        )  # an unknown Benchmark, or parameters it refuses, before anything is recorded
        if workspace_dir is not None:
            _check_new_workspace(workspace_dir)
    except (RunConfigError, AgentError, ProgramError, SkillError) as exc:
        raise CliError(
            name_options(one_line(str(exc)), _OPTION_NAMES)
            if isinstance(exc, RunConfigError)
            else one_line(str(exc))
        ) from exc
    # Before the Run is recorded: a Ray that is missing or out of reach is refused first.
    with open_evaluator(executor, ray_address) as evaluator:
        try:
            with open_store(store_dir, create=True) as store:
                try:
                    run_id = create_run(
                        store,
                        benchmark_ref,
                        config,
                        identity,
                        program=program,
                        skills=skills,
                        agent_containment=containment,
                    )
                except (RunError, ValueError) as exc:
                    raise CliError(one_line(str(exc))) from exc
        except StoreError as exc:
            raise CliError(one_line(str(exc))) from exc
        carry(
            store_dir,
            run_id,
            workspace_dir,
            as_json=as_json,
            launcher=launcher,
            evaluator=evaluator,
        )


run.help = f"{inspect.cleandoc(run.help or '')}\n\n{_EXIT_HELP}"


@click.command(short_help="Carry on a Run whose Host stopped.")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--workspace",
    "workspace_dir",
    metavar="DIR",
    default=None,
    help="Agent workspace [default: a temporary directory rebuilt from the log].",
)
@click.option(
    "--allow-uncontained-agent",
    "allow_uncontained",
    is_flag=True,
    help="Where the Agent's jail cannot be set up (no user namespaces), run the Agent as the Host's user anyway; recorded in the Run.",
)
@executor_options
@store_option("; created if missing")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def resume(
    run_id: str,
    workspace_dir: str | None,
    allow_uncontained: bool,
    executor: str,
    ray_address: str | None,
    store_dir: str | None,
    as_json: bool,
) -> None:
    """Fold RUN's log (RUN: its id, run-<id>, `latest` or a unique prefix of an id) and
    carry it on: an evaluation that was reserved but not published is
    run again on the same Episodes, the Agent is restarted on a workspace rebuilt from the
    log, and Validation and Assessment pick up where they stopped. The executor may differ
    from the one the Run started on: it places Episodes, it does not change them."""
    check_executor(executor, ray_address)
    with open_evaluator(executor, ray_address) as evaluator:
        carry(
            store_dir,
            run_id,
            workspace_dir,
            as_json=as_json,
            launcher=ProviderLauncher(allow_uncontained=allow_uncontained),
            evaluator=evaluator,
        )


resume.help = f"{inspect.cleandoc(resume.help or '')}\n\n{_EXIT_HELP}"


def carry(
    store_dir: str | None,
    run_id: str,
    workspace_dir: str | None,
    *,
    as_json: bool,
    launcher: ProviderLauncher,
    evaluator: Evaluator | None = None,
) -> RunState:
    """Drive the Run to its end with a live view (on stderr); print the outcome (on stdout);
    exit with the status its terminal reason documents (``exit_status``) unless it finished.
    ``evaluator`` plays its Episodes (default: a local one)."""
    console = Console(stderr=True)
    interrupted: dict[str, Any] | None = None
    try:
        with open_existing(resolve_store(store_dir)) as store:  # a missing one: the CLI's hint
            # RUN as given: an id, run-<id>, latest or a unique prefix.
            run_id = run_id_of(resolve(store, run_id)) or run_id
            summary = summarize(store.events, run_stream_id(run_id))
            if store.read_only:
                raise CliError(
                    f"the store at {store.location} is read-only: the Run cannot be carried on there"
                    + (
                        f" (it has finished: `{cli_command('record', 'show', run_id)}` tells its outcome)"
                        if summary.finished
                        else ""
                    )
                )
            already_ended = summary.finished  # (the view folds on into ``summary``)
            if already_ended:
                click.echo(
                    f"the Run {run_id} has already ended ({summary.status}): nothing to resume",
                    err=True,
                )
            else:
                try:
                    launcher.containment()  # a resumed Run's Agent is contained as a new one's
                except AgentError as exc:
                    raise CliError(one_line(str(exc))) from exc
            view = RunView(console, summary)
            host = RunHost(
                store,
                run_id,
                launcher=launcher,
                workspace=Path(workspace_dir) if workspace_dir else None,
                on_change=view.update,
                evaluator=evaluator,
            )
            try:
                with interruptible(host.stop):
                    with view:
                        state = host.drive()
                    outcome = _outcome(summarize(store.events, run_stream_id(run_id)))
                if state.finished == "agent_failed" and not already_ended:
                    _print_agent_failure(store, host.events)
            except KeyboardInterrupt:
                interrupted = {"run_id": run_id, "status": "interrupted", "terminal_reason": None}
                with contextlib.suppress(Exception):
                    interrupted = _outcome(summarize(store.events, run_stream_id(run_id)))
            except (
                RunError,
                RunBusy,
                RunConfigError,
            ) as exc:  # RunConfigError: a recorded config that no longer reads
                raise CliError(one_line(str(exc))) from exc
    except StoreError as exc:
        raise CliError(one_line(str(exc))) from exc
    except KeyboardInterrupt:
        # Ctrl-C before the Host took over the signals (folding the log, checking the jail):
        # the Run is recorded, so the hint to resume it holds as it does later.
        interrupted = {"run_id": run_id, "status": "interrupted", "terminal_reason": None}
    if interrupted is not None:
        if as_json:
            emit_json(interrupted)
        click.echo(f"interrupted; resume with: {resume_command(store_dir, run_id)}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if as_json:
        emit_json(outcome)
    else:
        _print_summary(Console(), outcome)  # the result on stdout; the live view was on stderr
    status = exit_status(state.finished)
    if status:
        sys.exit(status)
    return state


def _check_chat(base_url: str | None, api_key_env: str | None) -> None:
    """The chat Agent's key variable (when named) is set and its endpoint answers, before
    anything is recorded: otherwise the Run would only end agent_failed."""
    if api_key_env and not os.environ.get(api_key_env):
        raise CliError(f"--api-key-env {api_key_env}: that environment variable is not set")
    if not base_url:
        return
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=10):
            pass
    except urllib.error.HTTPError:
        pass  # it answered (401 without a key, 404 where it lists no models): it is there
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"--base-url {base_url}: the chat endpoint does not answer ({one_line(str(reason))})"
        ) from exc


# What the Host writes in an Agent's workspace; a directory holding anything else is the user's.
_HOST_ENTRIES = frozenset(
    {
        PROGRAM_DIR,
        FEEDBACK_DIR,
        ANALYSIS_DIR,
        TASK_MD,
        TASK_JSON,
        SKILLS_DIR,
        CLI_SHIM,
        f".{CLI_SHIM}.new",
    }
)


def _check_new_workspace(workspace_dir: str) -> None:
    """``--workspace DIR`` of a new Run: missing, empty, or an earlier Run's workspace; never a
    file, nor a directory of the user's own files, which the Host would write among."""
    path = Path(workspace_dir)
    if path.exists() and not path.is_dir():
        raise CliError(f"--workspace {workspace_dir}: not a directory")
    if path.is_dir():
        foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in _HOST_ENTRIES)
        if foreign:
            shown = ", ".join(foreign[:3]) + (
                f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            )
            raise CliError(
                f"--workspace {workspace_dir}: holds files of its own ({shown}); "
                "give a new or empty directory (or an earlier Run's workspace)"
            )


AGENT_STDERR_LINES = 10  # of a failed Agent's stderr, printed when its Run ends


def _print_agent_failure(store: Store, events: list[Event]) -> None:
    """Why the Agent failed, from the record: its last error and the end of its stderr
    (read as ``record logs`` reads it, which prints all of it)."""
    from evopolicygym.cli.agent_logs import terminal_text
    from evopolicygym.cli.hints import cli_command
    from evopolicygym.records.agent_output import agent_attempts
    from evopolicygym.records.events import RunCreated

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


def _outcome(summary: RunSummary) -> dict[str, Any]:
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


def _print_summary(console: Console, outcome: dict[str, Any]) -> None:
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
            line = self._describe(event)
            if line:
                self.console.print(Text(printable(line)), overflow="fold", highlight=False)
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

    def _describe(self, event: Event) -> str | None:
        match event:
            case AgentStarted():
                return f"agent started (attempt {event.attempt})"
            case SubmissionPublished():
                return self._submission_line(
                    event.submission_id, "published", event.score, event.failures
                )
            case EvaluationFailed():
                line = self._submission_line(event.submission_id, "evaluation failed", None, None)
                return f"{line}: {one_line(event.error)}"
            case SubmissionRejected():
                return f"submit rejected: {event.code}: {one_line(event.message)}"
            case FinishRejected():
                return f"finish rejected: {event.code}: {one_line(event.message)}"
            case FinishAccepted():
                return f"finish accepted: candidates {', '.join(map(str, event.candidates))}"
            case AgentMessages():
                faults = [fault_line(m) for m in event.messages if m.role == "error"]
                return "\n".join(f"agent error: {fault}" for fault in faults) or None
            case AgentExited():
                how = [event.reason or "exited"]
                if event.exit_code is not None:
                    how.append(f"code {event.exit_code}")
                if event.signal is not None:
                    how.append(f"signal {event.signal}")
                return f"agent exited ({', '.join(how)})"
            case ValidationStarted():
                candidates = ", ".join(map(str, event.candidates))
                return f"validation: submissions {candidates} on {_episodes(event.episodes)} each"
            case ReferenceValidated():
                return f"validation: initial program scores {event.score:g}{_failed(event.failures)} (the reference)"
            case CandidateValidated():
                return f"validation: submission {event.submission_id} scores {event.score:g}{_failed(event.failures)}"
            case ValidationFailed():
                return f"validation failed: {one_line(event.error)}"
            case FinalSubmissionSelected():
                return f"selected submission {event.submission_id} (validation {event.score:g})"
            case AssessmentStarted():
                return (
                    f"assessment: submission {event.submission_id} on {_episodes(event.episodes)}"
                )
            case AssessmentCompleted():
                return (
                    f"assessment: submission {event.submission_id} scores {event.score:g} "
                    f"on {_episodes(len(event.episodes))}{_failed(event.failures)}"
                )
            case AssessmentFailed():
                return f"assessment failed: {one_line(event.error)}"
            case CandidateAssessed() if event.score is None:
                return f"assessment: candidate {event.submission_id} failed: {one_line(event.error or '')}"
            case CandidateAssessed():
                return (
                    f"assessment: candidate {event.submission_id} scores {event.score:g} "
                    f"on {_episodes(len(event.episodes))}{_failed(event.failures)}"
                )
            case RunFinished():
                return f"run finished: {event.reason}"
        return None

    def _submission_line(
        self, submission_id: int, status: str, score: float | None, failures: int | None
    ) -> str:
        """``submission 3  score 73  1 Episode  published`` (and failures, when any)."""
        episodes = self._summary.submission(submission_id).episodes
        parts = [f"submission {submission_id}"]
        if score is not None:
            parts.append(f"score {score:g}")
        parts.append(_episodes(episodes))
        parts.append(status + (_failed(failures) if failures else ""))
        return "  ".join(parts)

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


def _episodes(count: int) -> str:
    return f"{count} Episode{'' if count == 1 else 's'}"


def _failed(failures: int | None) -> str:
    return f", {failures} failed" if failures else ""
