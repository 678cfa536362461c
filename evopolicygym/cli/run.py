"""``evopolicy run`` and ``evopolicy resume``: carry a Run with a live view of its progress."""

from __future__ import annotations

import contextlib
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import PROVIDERS, AgentError, agent_identity
from evopolicygym.cli.errors import CliError, name_options
from evopolicygym.cli.executors import check_executor, executor_options, open_evaluator
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.loading import load
from evopolicygym.cli.options import finite, not_empty, param_option, store_option
from evopolicygym.cli.output import emit_json, one_line
from evopolicygym.cli.run_checks import OPTION_NAMES, check_chat, check_new_workspace
from evopolicygym.cli.run_exits import (
    EXIT_HELP,
    exit_status,
    outcome_of,
    print_agent_failure,
    print_outcome,
    resume_command,
)
from evopolicygym.cli.run_view import RunView
from evopolicygym.cli.signals import EXIT_INTERRUPTED, interruptible
from evopolicygym.cli.stores import check_store_dir, open_existing, resolve
from evopolicygym.program import Program, ProgramError
from evopolicygym.records.location import open_store, resolve_store
from evopolicygym.records.runs import run_id_of, run_stream_id, summarize
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
from evopolicygym.run.skills import Skill, SkillError, load_skill

if TYPE_CHECKING:
    from evopolicygym.benchmark import Benchmark
    from evopolicygym.evaluation import Evaluator
    from evopolicygym.transcript import AgentIdentity

__all__ = ["carry", "resume", "run"]


ALLOW_UNCONTAINED_HELP = (
    "Where the Agent's jail cannot be set up (no user namespaces), run the Agent as the "
    "Host's user anyway; recorded in the Run."
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
                f"{name!r} is not an environment variable name "
                "(give NAME: the Agent inherits its value)",
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
    "only once the budget is spent "
    "(--max-submissions x --max-episodes-per-submission must reach it).",
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
    help="Also assess every other validated candidate on the same held-out Episodes "
    "(a study of selection validity; the selection is unchanged).",
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
    help="Seconds of policy time per Episode, start-up plus every act(); "
    "past it the Episode fails as a timeout.",
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
    help="Bytes of bulk feedback artifacts (traces) kept in the workspace; "
    "the newest is always kept.",
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
    help="Episode traces each Submission's Feedback shows the Agent. "
    "benchmark: the Benchmark's own "
    "trace artifact (a Gymnasium task's: its first 3 Episodes, 200 steps each); N (0 to "
    f"{MAX_EPISODES:,}): the Host's recorded trace of the Submission's first N Episodes instead, "
    "one file each (0: no trace); all: of every Episode. "
    "N and all need --record-trajectories train or all.",
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
    help=ALLOW_UNCONTAINED_HELP,
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
            check_chat(base_url, api_key_env)
        # An unknown Benchmark, or parameters it refuses, before anything is recorded; the
        # Run is created with this Benchmark, not one loaded again.
        benchmark = load(benchmark_ref, params)
        if workspace_dir is not None:
            check_new_workspace(workspace_dir)
    except (RunConfigError, AgentError, ProgramError, SkillError) as exc:
        raise CliError(
            name_options(one_line(str(exc)), OPTION_NAMES)
            if isinstance(exc, RunConfigError)
            else one_line(str(exc))
        ) from exc
    _create_and_carry(
        store_dir,
        benchmark_ref,
        benchmark,
        config,
        identity,
        program=program,
        skills=skills,
        containment=containment,
        launcher=launcher,
        workspace_dir=workspace_dir,
        as_json=as_json,
        executor=executor,
        ray_address=ray_address,
    )


def _create_and_carry(
    store_dir: str | None,
    benchmark_ref: str,
    benchmark: Benchmark,
    config: RunConfig,
    identity: AgentIdentity,
    *,
    program: Program | None,
    skills: list[Skill],
    containment: str,
    launcher: ProviderLauncher,
    workspace_dir: str | None,
    as_json: bool,
    executor: str,
    ray_address: str | None,
) -> None:
    """Record the new Run with what `run` checked and loaded, then carry it."""
    # Before the Run is recorded: a Ray that is missing or out of reach is refused first.
    with open_evaluator(executor, ray_address) as evaluator:
        try:
            with open_store(store_dir, create=True) as store:
                try:
                    run_id = create_run(
                        store,
                        benchmark,
                        config,
                        identity,
                        benchmark_id=benchmark_ref,
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


# Its examples are kept apart from the docstring: a command line is wider than the code.
_EXAMPLES = (
    "\b\nExample:\n"
    "  evopolicy run --benchmark cartpole --agent reference --budget 64\n"
    "  evopolicy run --benchmark cartpole --agent command --agent-command 'my-agent --fast'\n"
    "  evopolicy run --benchmark cartpole --agent codex --model gpt-5-codex --effort high\n"
    "  evopolicy run --benchmark cartpole --agent chat --base-url http://127.0.0.1:8000/v1"
    " --model my-model\n"
    "  evopolicy run --benchmark cartpole --agent claude-code --skill ./skills/control\n"
    "  evopolicy run --benchmark cartpole --agent reference --executor ray --ray-address head:6379"
)
run.help = f"{inspect.cleandoc(run.help or '')}\n\n{_EXAMPLES}\n\n{EXIT_HELP}"


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
    help=ALLOW_UNCONTAINED_HELP,
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


resume.help = f"{inspect.cleandoc(resume.help or '')}\n\n{EXIT_HELP}"


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
                    f"the store at {store.location} is read-only: "
                    "the Run cannot be carried on there"
                    + (
                        f" (it has finished: `{cli_command('record', 'show', run_id)}` "
                        "tells its outcome)"
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
                    outcome = outcome_of(summarize(store.events, run_stream_id(run_id)))
                if state.finished == "agent_failed" and not already_ended:
                    print_agent_failure(store, host.events)
            except KeyboardInterrupt:
                interrupted = {"run_id": run_id, "status": "interrupted", "terminal_reason": None}
                with contextlib.suppress(Exception):
                    interrupted = outcome_of(summarize(store.events, run_stream_id(run_id)))
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
        print_outcome(Console(), outcome)  # the result on stdout; the live view was on stderr
    status = exit_status(state.finished)
    if status:
        sys.exit(status)
    return state
