"""``evopolicy export``: recorded Runs as a Hugging Face dataset, one config per format."""

from __future__ import annotations

import datetime as dt
import re
import typing
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evopolicygym.cli.errors import CliError, CliUsageError, name_options
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import not_empty, store_option
from evopolicygym.cli.output import emit_json
from evopolicygym.cli.stores import open_existing
from evopolicygym.records.events import TerminalReason
from evopolicygym.records.location import resolve_store
from evopolicygym_exporters import EXPORTERS, ExportError, ExportOptions, RunFilter, export
from evopolicygym_exporters.base import DEFAULT_SHARD_BYTES, SPLIT_BY
from evopolicygym_exporters.pipeline import ExportReport, split_warning

__all__ = ["export_command"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int:
    if value is None:
        return DEFAULT_SHARD_BYTES
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    if match is None or match.group(2).lower() not in _UNITS:
        raise click.BadParameter(f"{value!r} is not a size such as 256MB or 1GiB", ctx, param)
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def _formats(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise click.BadParameter(
            f"unknown format {', '.join(map(repr, unknown))} (formats: {', '.join(EXPORTERS)})",
            ctx,
            param,
        )
    if not names:
        raise click.BadParameter("give at least one format", ctx, param)
    return list(dict.fromkeys(names))


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a date (YYYY-MM-DD[THH:MM[:SS]][+HH:MM])", ctx, param
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def _steps(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int | None, int | None] | None:
    """``FIRST:STOP`` (half-open, either side may be left out, not both) or ``N`` (``N:N+1``)."""
    if value is None:
        return None
    match = re.fullmatch(r"(\d+)|(\d*):(\d*)", value.strip())
    if match is None or match.group(0) == ":":
        raise click.BadParameter(
            f"{value!r} is not a range of trainer steps such as 0:100, 50: or 3", ctx, param
        )
    if match.group(1):
        step = int(match.group(1))
        return step, step + 1
    first = int(match.group(2)) if match.group(2) else None
    stop = int(match.group(3)) if match.group(3) else None
    if first is not None and stop is not None and first >= stop:
        raise click.BadParameter(f"{value!r} holds no step: FIRST must be below STOP", ctx, param)
    return first, stop


# ExportOptions' words for its settings, as `export` spells them, for its errors.
_OPTION_NAMES = (
    ("dpo minimum margin", "--dpo-min-margin"),
    ("dpo pairs per Run", "--dpo-max-pairs"),
    ("max shard size", "--max-shard-size"),
    ("test fraction", "--test-fraction"),
    ("minimum score", "--min-score"),
    ("split by", "--split-by"),
    ("trainer steps", "--trainer-step"),
)


@click.command("export", short_help="Export recorded Runs as a Hugging Face dataset.")
@click.option(
    "--format",
    "formats",
    multiple=True,
    required=True,
    callback=_formats,
    metavar="FORMAT",
    help=f"Dataset config to build (repeatable, or comma-separated): {', '.join(EXPORTERS)}.",
)
@click.option("--output", "-o", required=True, metavar="DIR", help="Dataset directory to write.")
@store_option()
@click.option(
    "--benchmark", multiple=True, metavar="ID", help="Keep Runs of this Benchmark (repeatable)."
)
@click.option(
    "--agent",
    multiple=True,
    metavar="NAME",
    help="Keep Runs of this agent name, provider or model (repeatable).",
)
@click.option(
    "--trainer-step",
    callback=_steps,
    metavar="FIRST:STOP",
    help="Keep training Runs (agent provider trainer) made at a trainer step in FIRST:STOP, "
    "half-open as Episode selectors are (0:100 is steps 0 to 99; 50: from 50 on; 3 alone is "
    "3:4). Runs without a trainer step are left out.",
)
@click.option(
    "--terminal-reason",
    multiple=True,
    # An interrupted Run has not finished, so it is never exported.
    type=click.Choice([r for r in typing.get_args(TerminalReason) if r != "interrupted"]),
    help="Keep Runs that ended so (repeatable).",
)
@click.option(
    "--min-score",
    type=float,
    default=None,
    metavar="X",
    help="Keep Runs whose final (held-out) score is at least as good as X, "
    "in the Benchmark's direction.",
)
@click.option(
    "--since",
    callback=_since,
    metavar="DATE",
    help="Keep Runs created at or after DATE (UTC unless given).",
)
@click.option(
    "--success-only",
    is_flag=True,
    help="sft, distill: only successful Runs (finished, the Agent handed off, "
    "and the final program beat the initial one).",
)
@click.option(
    "--per-turn",
    is_flag=True,
    help="sft, distill: prompt/completion rows ending at each assistant turn.",
)
@click.option(
    "--teacher",
    multiple=True,
    metavar="NAME",
    help="distill: keep this agent name, provider or model.",
)
@click.option(
    "--dpo-min-margin",
    type=float,
    default=0.0,
    show_default=True,
    help="dpo: least score difference between chosen and rejected, a finite number >= 0.",
)
@click.option(
    "--dpo-max-pairs",
    type=int,
    default=64,
    show_default=True,
    help="dpo: pairs per Run, widest first, at least 1.",
)
@click.option(
    "--test-fraction",
    type=float,
    default=0.1,
    show_default=True,
    help="Share of split groups (tasks, or Runs with --split-by run) in the test split, in [0, 1).",
)
@click.option(
    "--split-by",
    type=click.Choice(SPLIT_BY),
    default="task",
    show_default=True,
    help="Group splits by task (Benchmark, parameters, initial program, limits) or by Run; "
    "identical rows of a config share a split either way (rl rows are tasks).",
)
@click.option(
    "--max-shard-size",
    callback=_size,
    metavar="SIZE",
    help="Largest parquet shard, at least 64KiB (e.g. 512MB, 1GiB) [default: 256MiB].",
)
@click.option(
    "--license",
    "license_id",
    default="other",
    show_default=True,
    help="License id for the dataset card.",
)
@click.option(
    "--push-to-hub",
    metavar="REPO",
    callback=not_empty,
    help="Then upload to this Hub dataset repo (HF_TOKEN authenticates).",
)
@click.option("--private", is_flag=True, help="With --push-to-hub: create the repo private.")
@click.option("--revision", metavar="BRANCH", help="With --push-to-hub: the branch to push to.")
@click.option(
    "--create-pr",
    is_flag=True,
    help="With --push-to-hub: open a pull request instead of committing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def export_command(
    formats: list[str],
    output: str,
    store_dir: str | None,
    benchmark: tuple[str, ...],
    agent: tuple[str, ...],
    trainer_step: tuple[int | None, int | None] | None,
    terminal_reason: tuple[str, ...],
    min_score: float | None,
    since: dt.datetime | None,
    success_only: bool,
    per_turn: bool,
    teacher: tuple[str, ...],
    dpo_min_margin: float,
    dpo_max_pairs: int,
    test_fraction: float,
    split_by: str,
    max_shard_size: int,
    license_id: str,
    push_to_hub: str | None,
    private: bool,
    revision: str | None,
    create_pr: bool,
    as_json: bool,
) -> None:
    """Export the finished Runs of the store as one dataset directory: a config per FORMAT
    (parquet shards with explicit features), a dataset card and a manifest.

    \b
    Formats:
      sft       one Agent conversation: messages, tools, outcome columns
      rl        one task: prompt + verifiable reward spec (train seeds only)
      rl_tools  rl with the task in tool form, for a trainer's environment_factory
      dpo       two Programs on the same Episodes: prompt, chosen, rejected
      distill   sft rows of a teacher, with its identity and token usage
      rollouts  one policy Episode: observations, actions, rewards, ...
      programs  one Submission: files, diff, edit kind, scores
      events    one event: flat columns for analytics

    Load with datasets.load_dataset(OUTPUT, FORMAT). A config whose store head and
    settings are unchanged since the last export into OUTPUT is left as it is.
    """
    if (private or revision or create_pr) and not push_to_hub:
        raise CliUsageError("--private, --revision and --create-pr go with --push-to-hub")
    if revision and create_pr:
        raise CliUsageError(
            "--create-pr opens a pull request against the default branch: leave out --revision"
        )
    try:
        options = ExportOptions(
            run_filter=RunFilter(
                benchmark=benchmark,
                agent=agent,
                terminal_reason=terminal_reason,
                min_score=min_score,
                since=since,
                trainer_step=trainer_step,
            ),
            test_fraction=test_fraction,
            split_by=split_by,
            max_shard_bytes=max_shard_size,
            success_only=success_only,
            per_turn=per_turn,
            teacher=teacher,
            dpo_min_margin=dpo_min_margin,
            dpo_max_pairs=dpo_max_pairs,
            license=license_id,
        )
    except ValueError as exc:
        raise CliUsageError(name_options(str(exc), _OPTION_NAMES)) from exc
    report = _export_with_progress(store_dir, formats, output, options, quiet=as_json)
    _refuse_empty(report, formats)
    pushed = None
    if push_to_hub:
        pushed = _push(Path(output), push_to_hub, private, revision, create_pr)
    _warn_empty_splits(report)  # once it all went well: an error stays the one line
    summary = _summary(report, pushed)
    if as_json:
        emit_json(summary)
        return
    _print_summary(summary, report, formats)


def _export_with_progress(
    store_dir: str | None, formats: list[str], output: str, options: ExportOptions, *, quiet: bool
) -> ExportReport:
    """Export with a progress bar on stderr when it is a terminal (none with ``quiet``)."""
    err = Console(stderr=True)
    with (
        open_existing(resolve_store(store_dir)) as store,
        Progress(
            TextColumn("exporting Runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=quiet or not err.is_terminal,
        ) as progress,
    ):
        task = progress.add_task("runs", total=None)
        try:
            return export(
                store,
                formats,
                output,
                options,
                on_start=lambda total: progress.update(task, total=total),
                on_run=lambda: progress.advance(task),
            )
        except (ExportError, OSError) as exc:
            raise CliError(f"export failed: {exc}") from exc


def _refuse_empty(report: ExportReport, formats: list[str]) -> None:
    """An empty dataset is an error: nothing to load or push (its configs have no data)."""
    rows = sum(c["splits"][split]["rows"] for c in report.configs.values() for split in c["splits"])
    if rows:
        return
    what = (
        "no finished Run in the store matches the filters"
        if report.runs == 0
        else f"the {report.runs} Runs matched give no rows of {', '.join(formats)}"
    )
    raise CliError(
        f"{what}: the dataset in {report.output} is empty "
        f"(see `{cli_command('record', 'list')}`)"
        + (
            f"; {len(report.skipped)} Runs could not be read: {report.skipped[0]}"
            if report.skipped
            else ""
        )
    )


def _push(output: Path, repo: str, private: bool, revision: str | None, create_pr: bool) -> str:
    """Upload the dataset directory to the Hub; the pushed address."""
    from evopolicygym_exporters.hub import HubError
    from evopolicygym_exporters.hub import push_to_hub as push

    try:
        return push(output, repo, private=private, revision=revision, create_pr=create_pr)
    except HubError as exc:
        raise CliError(str(exc)) from exc


def _summary(report: ExportReport, pushed: str | None) -> dict[str, Any]:
    """The report as ``--json`` prints it."""
    return {
        "output": str(report.output),
        "runs": report.runs,
        "configs": {
            name: {
                "rows": {split: c["splits"][split]["rows"] for split in c["splits"]},
                "files": sum(len(c["splits"][split]["files"]) for split in c["splits"]),
                "unchanged": name in report.unchanged,
            }
            for name, c in report.configs.items()
        },
        "skipped": report.skipped,
        "warnings": [name_options(w, _OPTION_NAMES) for w in report.warnings],
        "pushed": pushed,
    }


def _print_summary(summary: dict[str, Any], report: ExportReport, formats: list[str]) -> None:
    """The report as a table of configs and a few lines, with how to load it."""
    table = Table("config", "train", "test", "files", "")
    for name, c in summary["configs"].items():
        rows = c["rows"]
        note = (
            "unchanged" if c["unchanged"] else ("no rows" if not sum(rows.values()) else "written")
        )
        table.add_row(
            name, str(rows.get("train", 0)), str(rows.get("test", 0)), str(c["files"]), note
        )
    console = Console()
    console.print(table)
    loaded = next(
        (name for name, c in summary["configs"].items() if sum(c["rows"].values())), formats[0]
    )
    console.print(f"{report.runs} Runs read into {report.output}", markup=False, highlight=False)
    console.print(
        f"load with: datasets.load_dataset({str(report.output)!r}, {loaded!r})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if report.skipped:
        console.print(
            f"left out {len(report.skipped)} Runs that cannot be read: {report.skipped[0]}",
            markup=False,
        )
    if summary["pushed"]:
        console.print(f"pushed: {summary['pushed']}")


def _warn_empty_splits(report: ExportReport) -> None:
    """One line on stderr when a config's split came out empty (a few tasks can all hash to
    train), naming the options that change it; configs alike are named together."""
    alike: dict[str, list[str]] = {}
    for name, splits in report.empty.items():
        alike.setdefault(split_warning(report.configs[name], splits[0]), []).append(name)
    if alike:
        told = "; ".join(f"{', '.join(names)}: {why}" for why, names in alike.items())
        click.echo(f"warning: {name_options(told, _OPTION_NAMES)}", err=True)
