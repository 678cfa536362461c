"""``evopolicy benchmarks``: list, show and check the registered Benchmarks."""

from __future__ import annotations

from typing import Any

import click
import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evopolicygym.benchmark import Benchmark, check_benchmark
from evopolicygym.cli.loading import FAMILIES, load
from evopolicygym.cli.options import param_option
from evopolicygym.cli.output import emit_json, human_block, one_line, print_table, printable
from evopolicygym.registry import baseline_dir, benchmark_names

__all__ = ["benchmarks", "spec_view"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON to stdout.")


@click.group()
def benchmarks() -> None:
    """Inspect the registered Benchmarks."""


@benchmarks.command("list")
@json_option
def list_benchmarks(as_json: bool) -> None:
    """List registered Benchmarks with a one-line description."""
    rows = [_describe(name) for name in benchmark_names()]
    if as_json:
        emit_json(rows)
        return
    # The name (what --benchmark takes) is never broken; the description wraps.
    print_table(
        Console(),
        ["name", "description"],
        [
            [Text(printable(row[key], cell=True), style=style) for key in ("benchmark_id", "description")]
            for row in rows
            for style in ["" if row["available"] else "red"]
        ],
    )


def _describe(name: str) -> dict[str, Any]:
    if name in FAMILIES:
        return {"benchmark_id": name, "description": FAMILIES[name], "available": True}
    try:
        description = load(name, {}).spec.description
    except Exception as exc:  # a broken third-party factory must not hide the others
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return {"benchmark_id": name, "description": f"unavailable: {one_line(message)}", "available": False}
    return {"benchmark_id": name, "description": one_line(description), "available": True}


def spec_view(benchmark: Benchmark) -> dict[str, Any]:
    """The public BenchmarkSpec plus what the CLI knows about it: digest, splits, baseline."""
    spec = benchmark.spec
    public: dict[str, Any] = msgspec.to_builtins(spec)
    # The spec's ``id`` is ``benchmark_id`` here, as in every command's --json.
    view: dict[str, Any] = {"benchmark_id": public.pop("id"), **public}
    view["environment_digest"] = spec.environment_digest
    view["splits"] = list(benchmark.splits)
    baseline = baseline_dir(benchmark)
    view["baseline"] = str(baseline) if baseline else None
    return view


@benchmarks.command()
@click.argument("benchmark_id", metavar="ID")
@param_option
@json_option
def show(benchmark_id: str, params: dict[str, str], as_json: bool) -> None:
    """Show the public spec of Benchmark ID."""
    view = spec_view(load(benchmark_id, params))
    if as_json:
        emit_json(view)
        return
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in view.items():
        shown = human_block(value)
        if key == "baseline" and value is None:
            shown = "none packaged"
        if key == "failure_score":
            shown = (
                f"{value:g} (what a failed Episode scores; no completed one scores less)"
                if value is not None
                else "none: not evaluated until given, e.g. --param failure_return=<worst return>"
            )
        table.add_row(key, Text(shown))  # plain text: '[...]' in a value is not markup
    Console().print(table)


@benchmarks.command()
@click.argument("benchmark_id", metavar="ID")
@param_option
@json_option
@click.pass_context
def check(ctx: click.Context, benchmark_id: str, params: dict[str, str], as_json: bool) -> None:
    """Run the conformance checks on Benchmark ID; exit 1 if any fails."""
    report = check_benchmark(load(benchmark_id, params))
    if as_json:
        emit_json({**msgspec.to_builtins(report), "ok": report.ok})
    else:
        table = Table("check", "result", "detail", title=f"conformance: {report.benchmark_id}")
        for c in report.checks:
            result = "[green]ok[/]" if c.ok else "[bold red]FAIL[/]"
            table.add_row(c.name, result, c.detail)
        Console().print(table)
    if not report.ok:
        failed = sum(1 for c in report.checks if not c.ok)
        if not as_json:
            click.echo(f"{failed} of {len(report.checks)} checks failed", err=True)
        ctx.exit(1)
