"""``evopolicy quickstart``: the whole product offline, in about a minute.

The reference Agent evolves a CartPole policy under a small budget into the
store; the Run is replayed and verified from its log; then what to try next.
"""

from __future__ import annotations

import click

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.benchmark import Benchmark
from evopolicygym.cli.errors import CliError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import store_option
from evopolicygym.cli.output import one_line
from evopolicygym.cli.run import carry
from evopolicygym.cli.stores import check_store_dir
from evopolicygym.evaluation import EvaluationConfig, evaluate
from evopolicygym.program import Program
from evopolicygym.records.location import open_store
from evopolicygym.records.store import StoreError
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run import (
    AssessmentConfig,
    RunConfig,
    RunError,
    RunState,
    ValidationConfig,
    create_run,
    replay_run,
)
from evopolicygym.run.pool import planned_split

__all__ = ["quickstart"]

BENCHMARK = "cartpole"


def _baseline_on_validation(benchmark: Benchmark, state: RunState) -> float | None:
    """The packaged baseline's score on the Run's validation Episodes, for comparison."""
    directory = baseline_dir(benchmark)
    if directory is None or not state.created:
        return None
    validation = state.cfg.validation
    episodes = planned_split(
        benchmark, validation.split, state.seeds["validation"], validation.episodes_per_candidate
    )
    result = evaluate(
        Program.from_directory(directory),
        benchmark,
        EvaluationConfig(split=validation.split, episodes=len(episodes)),
        episodes=episodes,
    )
    return float(result.feedback.score)


@click.command(short_help="Offline end-to-end demo: evolve, validate, assess, replay.")
@store_option("; created if missing")
@click.option(
    "--budget", type=click.IntRange(min=4), default=48, show_default=True, help="Episode budget."
)
def quickstart(store_dir: str | None, budget: int) -> None:
    """Run the built-in reference Agent (no network, no LLM) on `cartpole` with a small
    budget, replay the recorded Run from the log, and print what to try next."""
    check_store_dir(store_dir)
    benchmark = load_benchmark(BENCHMARK)  # once: for the Run and for the baseline's score
    config = RunConfig(
        episode_budget=budget,
        validation=ValidationConfig(episodes_per_candidate=8, max_candidates=3),
        assessment=AssessmentConfig(episodes=16),
    ).resolved()
    try:
        with open_store(store_dir, create=True) as store:
            # The reference Agent is this package's own code, not an adversary: where no jail
            # can be set up here it runs uncontained, and the Run records that.
            launcher = ProviderLauncher(allow_uncontained=True)
            run_id = create_run(
                store,
                benchmark,
                config,
                agent_identity("reference"),
                benchmark_id=BENCHMARK,
                agent_containment=launcher.containment(),
            )
    except (StoreError, RunError) as exc:
        raise CliError(one_line(str(exc))) from exc
    click.echo(
        f"run {run_id}: the reference Agent evolves a CartPole policy with {budget} Episodes",
        err=True,
    )
    state = carry(store_dir, run_id, None, as_json=False, launcher=launcher)
    with open_store(store_dir) as store:
        replay = replay_run(store, run_id)
        baseline = _baseline_on_validation(benchmark, state)
    verdict = "verifies" if not replay.problems else f"has {len(replay.problems)} problem(s)"
    click.echo(
        f"\nreplayed from the log: the Run {verdict} ({len(replay.timeline)} timeline entries)."
    )
    if baseline is not None and state.selected_score is not None:
        click.echo(
            f"on the same {config.validation.episodes_per_candidate} validation Episodes: "
            f"evolved {state.selected_score:g}, packaged baseline {baseline:g}"
        )
    # Each command on a line of its own, with the store and launcher of this one, so that a
    # narrow terminal wraps no command inside a quoted argument and each pastes as it is.
    hints = [
        ("the Run's timeline, verified from the log", cli_command("record", "replay", run_id)),
        ("the selected program", cli_command("record", "checkout", run_id, "final", "./best")),
        (
            "SQL over the record",
            cli_command("query", "SELECT run_id, status, best_score FROM runs"),
        ),
        (
            "Hugging Face training data",
            cli_command("export", "--format", "sft", "--format", "dpo", "-o", "./dataset"),
        ),
        ("another Benchmark", cli_command("run", "--benchmark", "acrobot", "--budget", "64")),
        (
            "your own Agent (--agent command) or an LLM one: see the examples",
            cli_command("run", "--help", takes_store=False),
        ),
    ]
    click.echo("\nWhat next:")
    for what, command in hints:
        click.echo(f"  {what}:\n    {command}")
