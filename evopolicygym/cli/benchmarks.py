"""``evopolicy benchmarks``: list, show and check the registered Benchmarks, and the
catalog's suites (``--suite core16``) and families, installed or not."""

from __future__ import annotations

from typing import Any

import click
import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evopolicygym.benchmark import (
    FAMILIES as CATALOG_FAMILIES,
)
from evopolicygym.benchmark import (
    RANDOM_POLICY_DIR,
    SUITES,
    TASKS,
    Benchmark,
    FirstStepOnly,
    SuiteMember,
    catalog_entry,
    check_benchmark,
    install_command,
    install_hint,
)
from evopolicygym.cli.errors import CliError
from evopolicygym.cli.loading import FAMILIES, load
from evopolicygym.cli.options import param_option
from evopolicygym.cli.output import emit_json, human_block, one_line, print_table, printable
from evopolicygym.registry import BenchmarkNotInstalled, baseline_dir, benchmark_names

__all__ = ["benchmarks", "spec_view"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON to stdout.")


@click.group()
def benchmarks() -> None:
    """Inspect the Benchmarks: every family's, installed or not."""


suite_option = click.option(
    "--suite",
    metavar="SUITE",
    default=None,
    help="Only the Benchmarks of this suite, in its order, installed or not "
    f"({', '.join(SUITES)}).",
)
family_option = click.option(
    "--family",
    metavar="FAMILY",
    default=None,
    help=f"Only this family's Benchmarks, installed or not ({', '.join(CATALOG_FAMILIES)}).",
)


def _known_suite(suite: str | None) -> None:
    if suite is not None and suite not in SUITES:
        raise CliError(f"unknown suite {suite!r} (suites: {', '.join(SUITES)})")


def _known_family(family: str | None) -> None:
    if family is not None and family not in CATALOG_FAMILIES:
        raise CliError(f"unknown family {family!r} (families: {', '.join(CATALOG_FAMILIES)})")


@benchmarks.command("list")
@suite_option
@family_option
@json_option
def list_benchmarks(suite: str | None, family: str | None, as_json: bool) -> None:
    """List every Benchmark of the catalog and every registered one, with its family,
    whether it is installed (if not, the command installing it) and a one-line description.

    With --suite or --family, only the Benchmarks of that suite (in its order) or family.
    """
    _known_suite(suite)
    _known_family(family)
    rows = _catalog_rows(suite, family)
    if as_json:
        emit_json(rows)
        return
    # The name (what --benchmark takes) and the install command are never broken; the
    # description wraps.
    headers = ["name", "family", "installed", "description"]
    table_rows = []
    for row in rows:
        style = "" if row["available"] else "red"
        installed = "yes" if row["installed"] else f"no: {row['install']}"
        description = row["description"]
        if row.get("alias_of"):
            description = f"(= {row['alias_of']}) {description}"
        cells = [row["benchmark_id"], row["family"] or "-", installed, description]
        table_rows.append([Text(printable(str(cell), cell=True), style=style) for cell in cells])
    print_table(Console(), headers, table_rows, keys=(0, 2))


def _catalog_rows(suite: str | None, family: str | None) -> list[dict[str, Any]]:
    """Registered Benchmarks (all, or the suite's or family's) plus the catalog's ids that
    are not installed, each saying how to install it."""
    registered = set(benchmark_names())
    if suite is not None:
        return [
            _describe(m.id, suite_member=(m.environment, m.family))
            if m.id in registered
            else _missing(m.id)
            for m in SUITES[suite]
            if family is None or m.family == family
        ]
    # Only a Benchmark the catalog does not place is built to learn its family.
    rows = [
        _describe(name)
        for name in sorted(registered)
        if family is None or name not in TASKS or TASKS[name].family == family
    ]
    rows += [_missing(name) for name in TASKS if name not in registered]
    if family is not None:
        rows = [row for row in rows if row["family"] == family]
    return rows


def _missing(benchmark_id: str) -> dict[str, Any]:
    task = TASKS[benchmark_id]
    return {
        "benchmark_id": benchmark_id,
        "description": task.description,
        "available": False,
        "installed": False,
        "install": install_hint(task.family),
        "family": task.family,
        "suites": [
            name for name, members in SUITES.items() if any(m.id == benchmark_id for m in members)
        ],
        "environment": task.environment,
        "alias_of": task.alias_of,
    }


def _describe(name: str, suite_member: tuple[str, str] | None = None) -> dict[str, Any]:
    environment, member_family = suite_member or (None, None)
    task = TASKS.get(name)
    row: dict[str, Any] = {
        "benchmark_id": name,
        "installed": True,
        "install": None,
        "family": member_family or (task.family if task is not None else None),
        "suites": [],
        "environment": environment,
        "alias_of": None,
    }
    if name in FAMILIES:
        return {**row, "description": FAMILIES[name], "available": True, "family": "gymnasium"}
    try:
        benchmark = load(name, {})
        spec = benchmark.spec
    except BenchmarkNotInstalled as exc:  # registered, but its family does not import
        command = install_command(row["family"]) if row["family"] else None
        return {**row, "description": one_line(str(exc)), "available": False, "installed": False,
                "install": command or "reinstall its distribution"}  # fmt: skip
    except Exception as exc:  # a broken third-party factory must not hide the others
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return {**row, "description": f"unavailable: {one_line(message)}", "available": False}
    entry = catalog_entry(benchmark)
    if entry is not None:
        row["family"] = entry.family
        row["suites"] = list(entry.suites)
    if spec.id != name:
        row["alias_of"] = spec.id
    if row["environment"] is None and isinstance(spec.metadata.get("env_id"), str):
        row["environment"] = spec.metadata["env_id"]
    if row["environment"] is None and task is not None:
        row["environment"] = task.environment
    return {**row, "description": one_line(spec.description), "available": True}


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
    entry = catalog_entry(benchmark)
    if entry is not None:
        view["family"] = entry.family
        view["suites"] = list(entry.suites)
        view["aliases"] = list(entry.aliases)
        view["profile"] = entry.profile
        view["difficulty"] = entry.difficulty
        # Easiest first; --param profile=NAME picks one.
        view["profiles"] = [
            {"name": p.name, "difficulty": p.difficulty, "description": p.description}
            for p in entry.profiles
        ]
        view["reference_scores"] = (
            None if entry.reference is None else msgspec.to_builtins(entry.reference)
        )
        view["deterministic"] = entry.deterministic
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
        if key == "profiles":
            shown = (
                "\n".join(
                    f"{p['difficulty']}  {p['name']}"
                    f"{'  (this one)' if p['name'] == view.get('profile') else ''}"
                    f"{'  ' + p['description'] if p['description'] else ''}"
                    for p in value
                )
                or "-"
            )
        if key == "reference_scores" and value is not None:
            shown = (
                f"baseline {value['baseline']:g}, uniform random {value['random']:g} "
                f"({value['episodes']} {value['split']} Episodes, seed {value['seed']})"
            )
        if key == "failure_score":
            shown = (
                f"{value:g} (what a failed Episode scores; no completed one scores less)"
                if value is not None
                else "none: not evaluated until given, e.g. --param failure_return=<worst return>"
            )
        table.add_row(key, Text(shown))  # plain text: '[...]' in a value is not markup
    Console().print(table)


@benchmarks.command()
@click.argument("benchmark_id", metavar="[ID]", required=False)
@param_option
@suite_option
@click.option(
    "--episodes",
    type=click.IntRange(min=1, max=1000),
    default=4,
    show_default=True,
    help="With --suite or --baseline: assessment Episodes the baseline and the random policy "
    "each play.",
)
@click.option(
    "--baseline",
    "against_random",
    is_flag=True,
    help="With ID: also play its baseline program and a uniform-random policy on the same "
    "assessment Episodes (seed 0), as --suite does: what a family records as its reference scores.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --baseline: parallel Episodes (the steps/s figure is per job).",
)
@click.option(
    "--require-installed",
    is_flag=True,
    help="With --suite: a Benchmark of the suite that is not installed fails the check.",
)
@json_option
@click.pass_context
def check(
    ctx: click.Context,
    benchmark_id: str | None,
    params: dict[str, str],
    suite: str | None,
    episodes: int,
    against_random: bool,
    jobs: int,
    require_installed: bool,
    as_json: bool,
) -> None:
    """Run the conformance checks on Benchmark ID; exit 1 if any fails.

    With --suite (instead of ID), check every installed Benchmark of the suite: its
    conformance (replaying Episodes to identical traces included), then its baseline
    program and a uniform-random policy on the same assessment Episodes (seed 0), printing
    both scores, the baseline's steps per second and the fixed cost of an Episode (one
    played to its first step only). Exit 1 if a check fails or a baseline does not beat
    random; Benchmarks not installed are listed, and fail only with --require-installed.
    With ID and --baseline, the same for one Benchmark, with the Episodes' terminations and
    the family's domain figures for both programs.
    """
    if suite is not None:
        if benchmark_id is not None or params or against_random:
            raise CliError("give either ID (with --param, --baseline) or --suite, not both")
        _known_suite(suite)
        _check_suite(ctx, suite, episodes, jobs, require_installed, as_json)
        return
    if benchmark_id is None:
        raise CliError("give a Benchmark ID or --suite SUITE")
    benchmark = load(benchmark_id, params)
    report = check_benchmark(benchmark)
    measured = _against_random(benchmark, episodes, jobs) if against_random else None
    problems = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
    problems += measured["problems"] if measured is not None else []
    if as_json:
        emit_json({**msgspec.to_builtins(report), **(measured or {}), "ok": not problems})
    else:
        table = Table("check", "result", "detail", title=f"conformance: {report.benchmark_id}")
        for c in report.checks:
            result = "[green]ok[/]" if c.ok else "[bold red]FAIL[/]"
            table.add_row(c.name, result, c.detail)
        Console().print(table)
        if measured is not None:
            for who in ("baseline", "random"):
                click.echo(
                    printable(
                        f"{who}: {measured[who]:.6g} on {episodes} assessment "
                        f"Episode{'s' if episodes != 1 else ''} "
                        f"(seed 0; failures {measured[who + '_failures']}, "
                        f"ends {human_block(measured[who + '_terminations'])}, "
                        f"domain {human_block(measured[who + '_domain'])})"
                    )
                )
            click.echo(
                f"baseline steps/s {measured['steps_per_s']:,.0f}, "
                f"fixed cost per Episode {measured['fixed_cost_s'] * 1000:,.1f} ms"
            )
    if problems:
        if not as_json:
            click.echo(f"check failed: {'; '.join(problems)}", err=True)
        ctx.exit(1)


def _check_suite(
    ctx: click.Context, suite: str, episodes: int, jobs: int, require_installed: bool, as_json: bool
) -> None:
    registered = set(benchmark_names())
    rows: list[dict[str, Any]] = []
    for member in SUITES[suite]:
        if member.id not in registered:
            rows.append(
                {
                    "benchmark_id": member.id,
                    "family": member.family,
                    "installed": False,
                    "install": install_hint(member.family),
                    "ok": not require_installed,
                }
            )
            continue
        if not as_json:
            click.echo(
                f"checking {member.id} ({episodes} Episode{'s' if episodes != 1 else ''} each)...",
                err=True,
            )
        rows.append(_check_member(member, episodes, jobs))
    ok = all(row["ok"] for row in rows)
    if as_json:
        emit_json({"suite": suite, "episodes": episodes, "ok": ok, "benchmarks": rows})
    else:
        # Fits 80 columns (`benchmarks list --suite` has the families); ms/Ep is the fixed cost.
        headers = ["name", "baseline", "random", "steps/s", "ms/Ep", "result"]
        table_rows = []
        for row in rows:
            if not row["installed"]:
                cells = [row["benchmark_id"], "-", "-", "-", "-", "not installed"]
            elif row.get("error"):
                cells = [row["benchmark_id"], "-", "-", "-", "-", f"FAIL: {row['error']}"]
            else:
                cells = [
                    row["benchmark_id"],
                    f"{row['baseline']:.4g}",
                    f"{row['random']:.4g}",
                    f"{row['steps_per_s']:,.0f}",
                    f"{row['fixed_cost_s'] * 1000:,.1f}",
                    "ok" if row["ok"] else "FAIL: " + "; ".join(str(p) for p in row["problems"]),
                ]
            table_rows.append([Text(printable(str(c), cell=True)) for c in cells])
        print_table(Console(), headers, table_rows)
        hints: dict[str, list[str]] = {}
        for row in rows:
            if not row["installed"]:
                hints.setdefault(row["install"], []).append(row["benchmark_id"])
        for hint, names in hints.items():
            click.echo(f"not installed: {', '.join(names)}: {hint}")
    if not ok:
        if not as_json:
            failed = sum(1 for row in rows if not row["ok"])
            click.echo(f"{failed} of {len(rows)} Benchmarks of {suite} failed the check", err=True)
        ctx.exit(1)


def _check_member(member: SuiteMember, episodes: int, jobs: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "benchmark_id": member.id,
        "family": member.family,
        "installed": True,
        "install": None,
    }
    try:
        benchmark = load(member.id, {})
        entry = catalog_entry(benchmark)
        row["family"] = entry.family if entry is not None else member.family
        report = check_benchmark(benchmark)
        measured = _against_random(benchmark, episodes, jobs)
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return {**row, "ok": False, "error": one_line(message)}
    problems = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok] + measured["problems"]
    return {**row, **measured, "conformance": report.ok, "problems": problems, "ok": not problems}


def _against_random(benchmark: Benchmark, episodes: int, jobs: int) -> dict[str, Any]:
    """The baseline and a uniform-random policy on the same assessment Episodes (seed 0), and
    the fixed cost of an Episode (one played to its first step only)."""
    from evopolicygym.evaluation import EvaluationConfig, Evaluator
    from evopolicygym.program import Program

    baseline = baseline_dir(benchmark)
    if baseline is None:
        raise CliError(f"{benchmark.spec.id}: no baseline program packaged")
    config = EvaluationConfig(
        split="assessment", episodes=episodes, seed=0, jobs=jobs, trace_steps=0
    )
    with Evaluator() as evaluator:
        ours = evaluator.evaluate(Program.from_directory(baseline), benchmark, config)
        random = evaluator.evaluate(Program.from_directory(RANDOM_POLICY_DIR), benchmark, config)
        first = evaluator.evaluate(
            Program.from_directory(RANDOM_POLICY_DIR), FirstStepOnly(benchmark), config
        )
    steps = sum(e.steps for e in ours.episodes)
    played_s = sum(e.duration_s for e in ours.episodes)
    problems = []
    better = ours.feedback.score > random.feedback.score
    if benchmark.spec.score_direction == "minimize":
        better = ours.feedback.score < random.feedback.score
    if not better:
        problems.append("the baseline does not beat random")
    if ours.failures:
        problems.append(f"{ours.failures} baseline Episodes failed")
    found: dict[str, Any] = {}
    for who, result in (("baseline", ours), ("random", random)):
        content = result.feedback.content if isinstance(result.feedback.content, dict) else {}
        found[who] = result.feedback.score
        found[f"{who}_failures"] = result.failures
        found[f"{who}_terminations"] = content.get("terminations", {})
        found[f"{who}_domain"] = content.get("domain", {})
    return {
        **found,
        "steps_per_s": steps / played_s if played_s > 0 else 0.0,
        "fixed_cost_s": sum(e.duration_s for e in first.episodes) / max(1, len(first.episodes)),
        "problems": problems,
    }
