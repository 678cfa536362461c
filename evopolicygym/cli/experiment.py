"""``evopolicy experiment``: run a matrix of Runs from a TOML spec, follow it, list experiments.

``run`` resolves the spec, checks every agent and Benchmark before recording anything,
then drives the experiment (``experiments.runner``) with the Agent launcher of this
package (``CliCellLauncher``): each cell's Run is created here and carried by
``evopolicy resume`` in a process of its own. ``status`` and ``list`` read the
experiment stream (``records.experiments``); ``summary`` lives in its own module and
is loaded when used.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.hints import cli_command
from evopolicygym.cli.options import StoreGroup, store_option
from evopolicygym.cli.output import emit_json, one_line, print_table, printable
from evopolicygym.cli.signals import EXIT_INTERRUPTED
from evopolicygym.cli.stores import check_store_dir, open_existing, run_status, store_root
from evopolicygym.records.events import ExperimentCell, ExperimentCreated
from evopolicygym.records.location import STORE_ENV, Store, StoreUrl, resolve_store
from evopolicygym.records.store import StoreError

if TYPE_CHECKING:  # the Benchmarks load lazily: `experiment --help` imports none
    from evopolicygym.benchmark import Benchmark

__all__ = ["CliCellLauncher", "experiment"]

_SUBCOMMANDS_ELSEWHERE = {"summary": "evopolicygym.cli.experiment_summary:summary"}

EXIT_INCOMPLETE = 3
_RUN_EXIT_HELP = """\b
Exit status:
  0    every cell's Run ended with an outcome (finished, agent_exited, budget_exhausted)
  1    an error before or around the experiment (one line on stderr)
  2    a usage error
  3    some cell did not: a fault past --retries (agent_failed, evaluation_failed,
       validation_failed, assessment_failed), a Run that could not be created, or a
       Run whose carrying process stopped short; run the same command again to go on
  130  interrupted by Ctrl-C or SIGTERM; run the same command again to go on
The same with --json."""


class ExperimentGroup(StoreGroup):
    """The experiment commands; those of other modules (``summary``) load when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(
            {*self.commands, *(n for n in _SUBCOMMANDS_ELSEWHERE if self._elsewhere(n) is not None)}
        )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _SUBCOMMANDS_ELSEWHERE:
            return self._elsewhere(cmd_name)
        return super().get_command(ctx, cmd_name)

    @staticmethod
    def _elsewhere(name: str) -> click.Command | None:
        module, _sep, attr = _SUBCOMMANDS_ELSEWHERE[name].partition(":")
        try:
            command: click.Command = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module is there but fails to import: not ours to hide
                raise
            return None
        return command


@click.group(
    cls=ExperimentGroup,
    short_help="Run and summarize matrices of Runs (agents x Benchmarks x seeds).",
)
def experiment() -> None:
    """Experiments: a TOML spec names agents, Benchmarks (with parameters), Run seeds,
    agent seeds and a Run profile; `experiment run` carries one Run per cell of their
    product and records which Run stands for which cell, so running it again goes on
    where it stopped.

    \b
    Example:
      evopolicy experiment run examples/experiments/quick.toml
      evopolicy experiment status quick
      evopolicy experiment summary quick
    """


# --------------------------------------------------------------------------- the launcher


class CliCellLauncher:
    """Creates a cell's Run with this package's agents (``experiments.runner.CellLauncher``)
    and carries it with ``evopolicy resume`` in a new process."""

    def __init__(self, *, allow_uncontained: bool) -> None:
        from evopolicygym.agents.launcher import ProviderLauncher

        self.allow_uncontained = allow_uncontained
        self.launcher = ProviderLauncher(allow_uncontained=allow_uncontained)
        self._containment: str | None = None
        # The matrix's Benchmarks as ``check`` loaded them, by name: each cell's Run is
        # created with its own, not one loaded again.
        self._benchmarks: dict[str, Benchmark] = {}

    def _identity(self, created: ExperimentCreated, agent_name: str, agent_seed: int) -> Any:
        from evopolicygym.agents.providers import agent_identity

        agent = next(a for a in created.agents if a.name == agent_name)
        options = agent.options
        return agent_identity(
            agent.provider,
            command=options.get("agent_command"),
            seed=agent_seed,
            env=tuple(options.get("agent_env", ())),
            name=agent.name,
            model=options.get("model"),
            effort=options.get("effort"),
            base_url=options.get("base_url"),
            api_key_env=options.get("api_key_env"),
            max_turns=options.get("max_turns"),
            max_tokens=options.get("max_tokens"),
        )

    def check(self, created: ExperimentCreated) -> None:
        """Every agent, skill and Benchmark of the matrix, and the Agent's containment, before
        anything is recorded; ``CliError`` naming the first problem."""
        from evopolicygym.agents.providers import AgentError
        from evopolicygym.cli.loading import load
        from evopolicygym.cli.run_checks import check_chat
        from evopolicygym.run.skills import SkillError, load_skill

        for agent in created.agents:
            try:
                self._identity(created, agent.name, 0)
                for directory in agent.options.get("skills", ()):
                    load_skill(directory)
            except (AgentError, SkillError) as exc:
                raise CliError(f"agents {agent.name}: {one_line(str(exc))}") from exc
            if agent.provider == "chat":
                check_chat(agent.options.get("base_url"), agent.options.get("api_key_env"))
        for benchmark in created.benchmarks:
            try:
                self._benchmarks[benchmark.name] = load(benchmark.id, benchmark.params)
            except CliError as exc:
                raise CliError(f"benchmarks {benchmark.name}: {exc.format_message()}") from exc
            except (
                LookupError,
                ValueError,
                TypeError,
            ) as exc:  # an unknown id, a factory's refusal
                raise CliError(
                    f"benchmarks {benchmark.name}: {one_line(str(exc).strip(chr(39)))}"
                ) from exc
        try:
            self._containment = self.launcher.containment()
        except AgentError as exc:
            raise CliError(one_line(str(exc))) from exc

    def create(
        self, store: Store, experiment: ExperimentCreated, cell: ExperimentCell, run_id: str
    ) -> None:
        from evopolicygym.agents.providers import AgentError
        from evopolicygym.records.experiments import cell_config
        from evopolicygym.run import RunConfig, RunConfigError, RunError, create_run
        from evopolicygym.run.skills import SkillError, load_skill

        try:
            agent = next(a for a in experiment.agents if a.name == cell.agent)
            benchmark = next(b for b in experiment.benchmarks if b.name == cell.benchmark)
            config = RunConfig.from_dict(cell_config(experiment, cell)).resolved()
            skills = [load_skill(directory) for directory in agent.options.get("skills", ())]
            loaded = self._benchmarks.get(benchmark.name)
            create_run(
                store,
                benchmark.id if loaded is None else loaded,
                config,
                self._identity(experiment, cell.agent, cell.agent_seed),
                benchmark_id=benchmark.id,
                run_id=run_id,
                skills=skills,
                agent_containment=self._containment or self.launcher.containment(),
            )
        except (AgentError, SkillError, RunConfigError, RunError) as exc:
            raise ValueError(str(exc)) from exc

    def carry_argv(self, store: Path | StoreUrl, run_id: str) -> list[str]:
        from evopolicygym.experiments.runner import default_carry_argv

        if isinstance(store, StoreUrl):  # to the Runs' processes by the environment, not argv
            os.environ[STORE_ENV] = store.url
        return default_carry_argv(store, run_id, allow_uncontained=self.allow_uncontained)


# --------------------------------------------------------------------------- run


def _default_max_runs(jobs: int | None) -> int:
    cpus = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    return max(1, cpus // max(1, jobs or cpus))


class _Progress:
    """The live view: counts of cells done, running, pending and failed, and the last change."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.text = Text("")

    def update(self, outcome: Any) -> None:
        counts = {
            state: outcome.count(state)
            for state in ("done", "running", "pending", "failed", "interrupted")
        }
        line = (
            f"experiment {outcome.experiment_id}: {counts['done']}/{self.total} done, "
            f"{counts['running']} running, {counts['pending']} waiting"
        )
        if counts["failed"] or counts["interrupted"]:
            line += f", {counts['failed']} failed, {counts['interrupted']} stopped short"
        running = [
            f"  {p.cell.cell_id}: run {p.run_id}"
            + (f" (attempt {p.attempt})" if p.attempt > 1 else "")
            for p in outcome.cells
            if p.state == "running"
        ]
        self.text = Text("\n".join([line, *running]))


_SETTLED = (
    "done",
    "failed",
    "interrupted",
)  # a cell's states once this invocation is through with it


class _RunLines:
    """One line per Run as it ends, for a log or a pipe (where the live view is not drawn):
    its cell (agent/benchmark/seed), its id, how it ended and its score. A Run ended by a
    fault and retried is told when its retry starts. Cells that had ended before this
    invocation are left to the count at the end."""

    def __init__(self, location: Path | StoreUrl, *, err: bool) -> None:
        self.location = location
        self.err = err  # with --json, stdout holds the JSON alone
        self.carried: dict[str, tuple[str | None, int]] = {}  # cell -> its Run carried here
        self.told: set[tuple[str, str | None, int]] = set()
        self._own: Store | None = None  # opened beside the runner's, at the first line

    def update(self, outcome: Any) -> None:
        for p in outcome.cells:
            key = p.cell.cell_id
            carried = self.carried.pop(key, None)
            if carried is not None and carried != (p.run_id, p.attempt):
                self._tell(p.cell, *carried)  # it ended, and a retry took its place
            if p.state == "running":
                self.carried[key] = (p.run_id, p.attempt)
            elif p.state in _SETTLED and (carried is not None or p.outcome == "create_failed"):
                self._tell(p.cell, p.run_id, p.attempt, reason=p.outcome, detail=p.detail)

    def _tell(
        self,
        cell: ExperimentCell,
        run_id: str | None,
        attempt: int,
        *,
        reason: str | None = None,
        detail: str = "",
    ) -> None:
        if (cell.cell_id, run_id, attempt) in self.told:
            return
        self.told.add((cell.cell_id, run_id, attempt))
        facts = self._facts(run_id)
        reason = reason or facts.get("terminal_reason") or "stopped short"
        line = f"{printable(cell.cell_id)}: run {run_id or '-'} {reason}"
        if facts.get("assessment_score") is not None:
            line += f", assessment {facts['assessment_score']:g}"
        elif facts.get("validation_score") is not None:
            line += f", validation {facts['validation_score']:g}"
        elif reason != "stopped short":
            line += ", no score"
        if detail:
            line += f": {printable(one_line(detail))}"
        click.echo(line, err=self.err)

    def _facts(self, run_id: str | None) -> dict[str, Any]:
        """How the Run ended and its scores; {} when they cannot be read."""
        from evopolicygym.records.location import open_store
        from evopolicygym.records.runs import overview, run_stream_id

        if run_id is None:
            return {}
        try:
            store = self._own = self._own or open_store(self.location)
            stream = run_stream_id(run_id)
            info = next((i for i in store.events.streams(stream) if i.stream_id == stream), None)
        except StoreError:
            return {}  # the line is told without its score
        if info is None:
            return {}
        summary = overview(store.events, info)
        validation = summary.final_score if summary.validation_enabled else None
        return {
            "terminal_reason": summary.terminal_reason,
            "assessment_score": summary.assessment_score,
            "validation_score": validation,
        }

    def close(self) -> None:
        if self._own is not None:
            self._own.close()


def _cell_rows(outcome: Any) -> list[dict[str, Any]]:
    return [
        {
            "cell_id": p.cell.cell_id,
            "agent": p.cell.agent,
            "benchmark": p.cell.benchmark,
            "seed": p.cell.seed,
            "agent_seed": p.cell.agent_seed,
            "run_id": p.run_id,
            "attempt": p.attempt,
            "cell_state": p.state,
            "terminal_reason": p.outcome,
            "detail": p.detail or None,
        }
        for p in outcome.cells
    ]


@experiment.command("run", short_help="Run (or go on with) the experiment a spec describes.")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--retries",
    type=click.IntRange(min=0, max=100),
    default=1,
    show_default=True,
    help="New Runs a cell gets after a fault ended its Run (agent_failed, evaluation_failed, "
    "validation_failed, assessment_failed), counted over every invocation.",
)
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    default=None,
    help="Runs carried at once [default: this machine's CPUs (with --executor ray, the "
    "cluster's) // each Run's jobs (1 unless [run] says otherwise), at least 1].",
)
@click.option(
    "--executor",
    "executor_name",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the Runs are carried: local (processes on this machine) or ray (each Run's "
    "Host on a node of a Ray cluster, which Ray picks; needs a store every node reaches: "
    "a postgresql:// URL, or a directory every node mounts at the same path).",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    default=None,
    help="With --executor ray: the cluster to join, as HOST:PORT of its head (`ray start "
    "--head` prints it) [default: RAY_ADDRESS, else the cluster started on this machine, "
    "else a new one here].",
)
@click.option(
    "--allow-uncontained-agent",
    "allow_uncontained",
    is_flag=True,
    help="Where the Agent's jail cannot be set up (no user namespaces), run the Agents as the "
    "Host's user anyway; recorded in each Run.",
)
@store_option("; created if missing")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def run_experiment(
    spec_path: Path,
    retries: int,
    max_runs: int | None,
    executor_name: str,
    ray_address: str | None,
    allow_uncontained: bool,
    store_dir: str | None,
    as_json: bool,
) -> None:
    """Carry one Run per cell of SPEC's matrix (agents x benchmarks x seeds x agent_seeds),
    --max-runs at once, each in a process of its own; the experiment's stream records
    which Run stands for which cell. Running the same command again goes on: cells whose
    Run ended are skipped, interrupted Runs are resumed from their logs, and a cell whose
    Run a fault ended gets a new Run while it has retries left. The same name with a
    changed matrix is refused.

    \b
    Spec (TOML):
      name = "quick"                 # the experiment id
      profile = "quick"              # quick, paper-128 or a TOML file of RunConfig fields
      seeds = 3                      # Run seeds 0..2 (or a list); agent_seeds likewise
      [run]                          # RunConfig fields over the profile's
      episode_budget = 32
      [[agents]]                     # provider, name, model, effort, base_url,
      provider = "reference"         # api_key_env, max_turns, max_tokens,
      [[benchmarks]]                 # agent_command, agent_env, skills
      id = "cartpole"                # params = { ... }, name = "label"
    """
    from evopolicygym.experiments.runner import (
        Executor,
        ExperimentBusy,
        ExperimentMismatch,
        ExperimentRunner,
        LocalExecutor,
    )
    from evopolicygym.experiments.spec import SpecError, load_spec, resolve

    if ray_address is not None and executor_name != "ray":
        raise CliUsageError("--ray-address is for --executor ray")
    for given in (str(spec_path), store_dir or "", ray_address or ""):
        # Paths the Runs' processes, the Agents' environment and JSON carry: refused here, as
        # the CLI refuses any argument that is not UTF-8, not after a store was made there.
        given.encode("utf-8")
    try:
        created = resolve(load_spec(spec_path), spec_path.parent)
    except SpecError as exc:
        raise CliError(str(exc)) from exc
    check_store_dir(store_dir)
    launcher = CliCellLauncher(allow_uncontained=allow_uncontained)
    launcher.check(created)
    jobs = created.config.get("jobs")
    location = resolve_store(store_dir)
    executor: Executor
    if executor_name == "ray":
        location, executor = _ray_executor(
            created, location, max_runs, jobs if isinstance(jobs, int) else 1, ray_address
        )
    else:
        executor = LocalExecutor(
            max_runs or _default_max_runs(jobs if isinstance(jobs, int) else None)
        )
    console = Console(stderr=True)
    progress = _Progress(console, len(created.cells))
    # No refresh thread (auto_refresh off): the runner's children are forked with a preexec
    # function, which is only safe without other threads. Off a terminal, no live view.
    live = Live(progress.text, console=console, auto_refresh=False, transient=True)
    # Where stdout is not a terminal (a log, a pipe), a line per Run as it ends instead.
    stdout_is_terminal = sys.stdout.isatty()  # CliRunner swaps sys.stdout too
    lines = None if stdout_is_terminal else _RunLines(location, err=as_json)

    def changed(outcome: Any) -> None:
        progress.update(outcome)
        if console.is_terminal:
            live.update(progress.text, refresh=True)
        if lines is not None:
            lines.update(outcome)

    runner = ExperimentRunner(
        location, created, launcher, executor, retries=retries, on_change=changed
    )
    try:
        with _forwarding(runner), live if console.is_terminal else contextlib.nullcontext():
            outcome = runner.run()
    except (ExperimentMismatch, ExperimentBusy, StoreError) as exc:
        raise CliError(str(exc)) from exc
    finally:
        if lines is not None:
            lines.close()
    _print_result(outcome, as_json=as_json, told=lines.told if lines is not None else set())
    if outcome.interrupted:
        click.echo("interrupted; run the same command again to go on", err=True)
        raise SystemExit(EXIT_INTERRUPTED)
    if not outcome.complete:
        raise SystemExit(EXIT_INCOMPLETE)


run_experiment.help = f"{inspect.cleandoc(run_experiment.help or '')}\n\n{_RUN_EXIT_HELP}"


def _print_result(outcome: Any, *, as_json: bool, told: set[tuple[str, str | None, int]]) -> None:
    """The experiment's outcome on stdout: one JSON object, or the cells that did not end
    with an outcome (those not ``told`` line by line already) and the count."""
    cells = _cell_rows(outcome)
    result = {
        "experiment_id": outcome.experiment_id,
        "cells": len(cells),
        "done": outcome.count("done"),
        "failed": outcome.count("failed"),
        "stopped": outcome.count("interrupted")
        + outcome.count("pending")
        + outcome.count("running"),
        "runs_started": outcome.runs_started,
        "interrupted": outcome.interrupted,
        "complete": outcome.complete,
        "wall_s": round(outcome.wall_s, 3),
        "bookkeeping_s": round(outcome.bookkeeping_s, 3),
        "create_s": round(outcome.create_s, 3),
        "cell_runs": cells,
    }
    if as_json:
        emit_json(result)
        return
    for row in cells:
        if (
            row["cell_state"] in ("failed", "interrupted")
            and (row["cell_id"], row["run_id"], row["attempt"]) not in told
        ):
            reason = row["terminal_reason"] or "stopped short"
            detail = f": {row['detail']}" if row["detail"] else ""
            click.echo(f"{row['cell_id']}: run {row['run_id']} {reason}{detail}")
    click.echo(
        f"experiment {outcome.experiment_id}: {result['done']} of {len(cells)} cells "
        "ended with an outcome, "
        f"{result['failed']} failed, {result['stopped']} not ended; "
        f"{outcome.runs_started} Runs carried "
        f"in {outcome.wall_s:.1f} s"
    )


def _ray_executor(
    created: ExperimentCreated,
    location: Path | StoreUrl,
    max_runs: int | None,
    jobs: int,
    address: str | None,
) -> tuple[Path | StoreUrl, Any]:
    """The store as every node names it (a directory made absolute: a Ray worker starts
    elsewhere) and a ``RayExecutor`` whose carries get, in their environment, the store's
    URL and the variables the spec's Agents read (``api_key_env``, ``agent_env``) as this
    process has them; ``CliError`` when Ray is missing or its cluster cannot be joined."""
    from evopolicygym.experiments.ray_executor import RayExecutor, RayUnavailable

    env: dict[str, str] = {}
    if isinstance(location, StoreUrl):
        env[STORE_ENV] = location.url
    else:
        location = location.absolute()
    for agent in created.agents:
        names = [agent.options.get("api_key_env"), *agent.options.get("agent_env", ())]
        env.update(
            {
                name: os.environ[name]
                for name in names
                if isinstance(name, str) and name in os.environ
            }
        )
    try:
        return location, RayExecutor(max_runs, address=address, cpus_per_run=max(1, jobs), env=env)
    except RayUnavailable as exc:
        raise CliError(str(exc)) from None


class _forwarding:
    """SIGINT and SIGTERM stop the runner (no new Runs) and reach the running ones, which
    record their interruption; the command returns once they have ended."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.runner.stop(signum)

    def __enter__(self) -> None:
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


# --------------------------------------------------------------------------- status and list


def _status_rows(store: Store, experiment_id: str) -> tuple[int, list[dict[str, Any]]]:
    """The experiment's cells in matrix order, each with its current Run (None: waiting)."""
    from evopolicygym.records.experiments import read_experiment
    from evopolicygym.records.runs import overview, run_stream_id
    from evopolicygym.records.store import StreamInfo

    record = read_experiment(store.events, experiment_id)
    current = {r.cell_id: r for r in record.runs() if r.current}
    benchmarks = {b.name: b.id for b in record.created.benchmarks} if record.created else {}
    versions = {info.stream_id: info.version for info in store.events.streams("run-")}
    rows = []
    for cell in record.cells:
        cell_run = current.get(cell.cell_id)
        status, assessment = "waiting", None
        if cell_run is not None:
            stream = run_stream_id(cell_run.run_id)
            status = "not created"
            if stream in versions:
                summary = overview(store.events, StreamInfo(stream, versions[stream]))
                status, assessment = run_status(store, summary), summary.assessment_score
        rows.append(
            {
                "cell_id": cell.cell_id,
                "agent": cell.agent,
                "benchmark": cell.benchmark,
                "benchmark_id": benchmarks.get(cell.benchmark),
                "seed": cell.seed,
                "agent_seed": cell.agent_seed,
                "run_id": cell_run.run_id if cell_run else None,
                "attempt": cell_run.attempt if cell_run else 0,
                "status": status,
                "terminal_reason": cell_run.outcome if cell_run else None,
                "assessment_score": assessment,
            }
        )
    return len(record.cells), rows


@experiment.command("status", short_help="Each cell of an experiment: its Run and how it stands.")
@click.argument("experiment_id", metavar="EXPERIMENT")
@store_option()
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON object with one entry per cell."
)
@click.pass_context
def status(ctx: click.Context, experiment_id: str, store_dir: str | None, as_json: bool) -> None:
    """Per cell of EXPERIMENT: agent, Benchmark, seed, agent seed, the Run standing for it,
    its attempt (above 1: retried), its status (``waiting`` before it has a Run) and
    assessment score."""
    from evopolicygym.records.experiments import UnknownExperiment

    with open_existing(store_root(ctx, store_dir)) as store:
        try:
            total, rows = _status_rows(store, experiment_id)
        except UnknownExperiment as exc:
            raise CliError(f"{exc.args[0]} (see `{cli_command('experiment', 'list')}`)") from exc
    if as_json:
        emit_json({"experiment_id": experiment_id, "cells": total, "cell_runs": rows})
        return
    headers = ["agent", "benchmark", "seed", "agent seed", "run", "attempt", "status", "assessment"]
    table = [
        [
            printable(r["agent"], cell=True),
            printable(r["benchmark"], cell=True),
            str(r["seed"]),
            str(r["agent_seed"]),
            r["run_id"] or "",
            str(r["attempt"] or ""),
            r["status"],
            "" if r["assessment_score"] is None else f"{r['assessment_score']:g}",
        ]
        for r in rows
    ]
    print_table(Console(), headers, table, keys=(4,))
    ended = sum(
        1 for r in rows if r["terminal_reason"] in ("finished", "agent_exited", "budget_exhausted")
    )
    waiting = sum(1 for r in rows if r["run_id"] is None)
    click.echo(f"{ended} of {total} cells ended with an outcome; {waiting} have no Run yet")


@experiment.command("list", short_help="The experiments in the store.")
@store_option()
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON list with one object per experiment."
)
@click.pass_context
def list_experiments(ctx: click.Context, store_dir: str | None, as_json: bool) -> None:
    """Each experiment in the store: its profile, cells and how many have ended."""
    from evopolicygym.experiments.decider import OUTCOMES
    from evopolicygym.records.experiments import experiment_ids, read_experiment

    with open_existing(store_root(ctx, store_dir)) as store:
        rows = []
        for experiment_id in experiment_ids(store.events):
            record = read_experiment(store.events, experiment_id)
            runs = [r for r in record.runs() if r.current]
            rows.append(
                {
                    "experiment_id": experiment_id,
                    "profile": record.created.profile if record.created else None,
                    "cells": len(record.cells),
                    "done": sum(1 for r in runs if r.outcome in OUTCOMES),
                    "failed": sum(
                        1 for r in runs if r.outcome is not None and r.outcome not in OUTCOMES
                    ),
                    "runs": len(record.runs()),
                }
            )
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo(
            "no experiments in this store "
            f"(start one with `{cli_command('experiment', 'run', 'SPEC')}`)"
        )
        return
    print_table(
        Console(),
        ["experiment", "profile", "cells", "done", "failed", "runs"],
        [
            [
                str(r["experiment_id"]),
                str(r["profile"]),
                str(r["cells"]),
                str(r["done"]),
                str(r["failed"]),
                str(r["runs"]),
            ]
            for r in rows
        ],
    )
