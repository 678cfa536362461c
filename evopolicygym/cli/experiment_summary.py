"""``evopolicy experiment summary``: the study's figures for one experiment.

The leaderboard (rank score; per Benchmark the mean Assessment score ± SD, its 95%
interval and how many Runs were scored), then selection validity, improvement
efficiency, edit dynamics, budget use and failure shares, all from the analysis
dataframes (``evopolicygym.analysis.diagnostics`` defines each figure).
"""

from __future__ import annotations

import math
from typing import Any

import click
from rich.console import Console

from evopolicygym.cli.errors import CliError
from evopolicygym.cli.options import store_option
from evopolicygym.cli.output import emit_json, print_table, printable
from evopolicygym.cli.stores import open_existing, store_root

__all__ = ["summary"]


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}g}"


def _share(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _cell(row: dict[str, Any] | None) -> str:
    """One agent's scores on one Benchmark: ``mean ± sd [low, high] n=scored/runs``."""
    if row is None:
        return "-"
    counted = f"n={row['scored']}/{row['runs']}"
    if row["mean"] is None:
        return f"no score {counted}"
    spread = (
        f" ± {_num(row['sd'])} [{_num(row['ci_low'])}, {_num(row['ci_high'])}]"
        if row["sd"] is not None
        else ""
    )
    return f"{_num(row['mean'])}{spread} {counted}"


def _label(value: Any) -> str:
    return printable(str(value), cell=True)


def _print(found: dict[str, Any], experiment_id: str) -> None:
    console = Console()
    _print_leaderboard(console, found, experiment_id)
    _print_selection_validity(console, found["selection_validity"])
    _print_improvement_efficiency(console, found["improvement_efficiency"])
    _print_edit_dynamics(console, found["edit_dynamics"])
    _print_budget_use(console, found["budget_use"])


def _print_leaderboard(console: Console, found: dict[str, Any], experiment_id: str) -> None:
    scores = {(r["agent"], r["benchmark"]): r for r in found["scores"]}
    benchmarks = sorted({b for _, b in scores})
    click.echo(f"Leaderboard of {experiment_id}: {found['runs']} Runs (each cell's current one)")
    click.echo(
        "Assessment score per Benchmark: mean ± SD [95% t-interval] n=scored/Runs; "
        "a Run with no Assessment score is counted in Runs, not in the mean."
    )
    print_table(
        console,
        ["agent", "rank score", *map(_label, benchmarks)],
        [
            [
                _label(row["agent"]),
                _num(row["rank_score"], 3),
                *(_cell(scores.get((row["agent"], b))) for b in benchmarks),
            ]
            for row in found["leaderboard"]
        ],
    )


def _print_selection_validity(console: Console, validity: dict[str, Any]) -> None:
    click.echo(
        "\nSelection validity: the selected Program's Validation vs Assessment score across Runs"
    )
    print_table(
        console,
        ["benchmark", "pairs", "spearman", "mean gap (assessment - validation)"],
        [
            [_label(r["benchmark"]), str(r["pairs"]), _num(r["spearman"], 3), _num(r["mean_gap"])]
            for r in validity["benchmarks"]
        ],
    )
    if not validity["candidates"]:
        return
    rhos = [r["spearman"] for r in validity["candidates"] if r["spearman"] is not None]
    mean = sum(rhos) / len(rhos) if rhos else None
    click.echo(
        f"\nCandidates assessed in {len(validity['candidates'])} Runs "
        "(every validated candidate on the same"
    )
    click.echo(
        "Assessment Episodes): Validation vs Assessment rank correlation, "
        f"mean Spearman {_num(mean, 3)}"
    )
    print_table(
        console,
        ["run", "candidates", "spearman"],
        [
            [_label(r["run_id"]), str(r["candidates"]), _num(r["spearman"], 3)]
            for r in validity["candidates"]
        ],
    )


def _print_improvement_efficiency(console: Console, efficiency: dict[str, Any]) -> None:
    click.echo(
        "\nImprovement efficiency: area under the normalized best-so-far over the budget "
        "(1 = best from the start)"
    )
    print_table(
        console,
        ["agent", "benchmark", "runs", "area", "unmatched steps"],
        [
            [
                _label(r["agent"]),
                _label(r["benchmark"]),
                str(r["runs"]),
                _num(r["area"], 3),
                f"{r['unmatched_steps']}/{r['steps']}",
            ]
            for r in efficiency["groups"]
        ],
        keys=(0, 1),
    )


def _print_edit_dynamics(console: Console, dynamics: list[dict[str, Any]]) -> None:
    click.echo(
        "\nEdit dynamics: shares of each edit kind against the parent (synthesis: new structure,"
    )
    click.echo(
        "parametric: numbers, cosmetic: comments or layout, none); "
        "hits: Submissions that beat their"
    )
    click.echo("parent on matched indices, of all and of those with matched indices")
    print_table(
        console,
        ["agent", "benchmark", "edits", "synth", "param", "cosm", "none", "hits", "of matched"],
        [
            [
                _label(r["agent"]),
                _label(r["benchmark"]),
                str(r["submissions"]),
                _share(r["synthesis"]),
                _share(r["parametric"]),
                _share(r["cosmetic"]),
                _share(r["none"]),
                _share(r["hit_rate"]),
                _share(r["matched_hit_rate"]),
            ]
            for r in dynamics
        ],
        keys=(0, 1),
    )


def _print_budget_use(console: Console, budget_use: list[dict[str, Any]]) -> None:
    click.echo(
        "\nBudget use (mean share spent) and failures (shares of Episodes and Submissions); "
        "how Runs ended"
    )
    print_table(
        console,
        ["agent", "benchmark", "runs", "budget", "failed episodes", "failed submissions", "ended"],
        [
            [
                _label(r["agent"]),
                _label(r["benchmark"]),
                str(r["runs"]),
                _share(r["budget_share"]),
                _share(r["failed_episode_share"]),
                _share(r["failed_submission_share"]),
                ", ".join(f"{k}={v}" for k, v in r["terminal_reasons"].items()),
            ]
            for r in budget_use
        ],
        keys=(0, 1),
    )


@click.command("summary", short_help="The leaderboard and diagnostics of an experiment.")
@click.argument("experiment_id", metavar="EXPERIMENT")
@store_option()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every figure.")
@click.pass_context
def summary(ctx: click.Context, experiment_id: str, store_dir: str | None, as_json: bool) -> None:
    """The study's figures for EXPERIMENT (its id, as `experiment list` shows it), over each
    cell's current Run: per agent the rank score (per Benchmark, agents ranked by mean
    Assessment score in its direction, ties taking the best rank; (K - rank)/(K - 1)
    averaged over Benchmarks), per agent and Benchmark the mean ± SD and 95% t-interval of
    the Assessment score with the Runs scored, then selection validity (Validation vs
    Assessment, Spearman), improvement efficiency (best so far vs Episodes used), edit
    dynamics (edit kinds, hit rate) and budget use and failure shares."""
    from evopolicygym.analysis import diagnostics, runs_df, submissions_df
    from evopolicygym.records.experiments import UnknownExperiment

    with open_existing(store_root(ctx, store_dir)) as store:
        try:
            runs = runs_df(store, experiment=experiment_id)
            submissions = submissions_df(store, experiment=experiment_id)
        except UnknownExperiment as exc:
            raise CliError(f"{exc.args[0]} (see `evopolicy experiment list`)") from exc
    found = diagnostics.study(runs, submissions)
    if as_json:
        emit_json({"experiment_id": experiment_id, **found})
        return
    _print(found, experiment_id)
