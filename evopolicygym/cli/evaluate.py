"""``evopolicy evaluate``: one Program over a bounded list of Episodes."""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evopolicygym.benchmark import Benchmark, VideoOptions
from evopolicygym.cli.errors import CliError
from evopolicygym.cli.executors import check_executor, executor_options, open_evaluator
from evopolicygym.cli.loading import load, plan
from evopolicygym.cli.options import finite, not_empty, param_option
from evopolicygym.cli.output import clip, emit_json, human, one_line, print_table
from evopolicygym.cli.signals import EXIT_INTERRUPTED, interruptible
from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, ResourceLimits
from evopolicygym.program import Program, ProgramError
from evopolicygym.registry import baseline_dir

__all__ = ["evaluate", "result_view"]

FAILURE_CHARS = 80
MAX_EPISODES = 1_000_000  # as a Run's budget: planning more takes minutes before the first Episode
EPISODE_ROWS = 20  # the rest are counted in one line; --json has every one

# Exit statuses of `evaluate` (its --help; README): a score was measured, or it was not.
EXIT_ALL_FAILED = 3  # every Episode failed: the score is the failure score, no measurement
_EXIT_HELP = """\b
Exit status:
  0    the Program was evaluated (some Episodes may have failed: see failures)
  1    an error before or around the evaluation (one line on stderr)
  2    a usage error
  3    every Episode failed: the score is only the Benchmark's failure score
  130  interrupted by Ctrl-C or SIGTERM
The same with --json."""


@click.command(short_help="Evaluate a policy program on a Benchmark.")
@click.argument("program", metavar="PROGRAM", callback=not_empty)
@click.option("--benchmark", "benchmark_ref", required=True, metavar="ID", help="Benchmark id.")
@param_option
@click.option(
    "--split",
    default="train",
    show_default=True,
    help="Episode split (see `evopolicy benchmarks show ID`).",
)
@click.option(
    "--episodes",
    type=click.IntRange(min=1, max=MAX_EPISODES),
    default=8,
    show_default=True,
    help="Episodes to evaluate on.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**63 - 1),
    default=0,
    show_default=True,
    help="Evaluation seed: which Episodes of the split are planned.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel Episodes [default: CPUs; with --executor ray, the cluster's].",
)
@click.option(
    "--episode-timeout",
    type=click.FloatRange(min=0, max=86_400, min_open=True),
    callback=finite,
    default=30.0,
    show_default=True,
    help="Seconds of policy time per Episode, start-up plus every act(); past it "
    "the Episode fails as a timeout.",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(min=1, max=1 << 20),
    default=1024,
    show_default=True,
    help="Megabytes of address space a policy process may allocate beyond the interpreter and "
    "modules it starts with; an allocation past it fails the Episode as "
    "resource_limit. It bounds new allocations only: a small policy runs even at 1.",
)
@executor_options
@click.option(
    "--videos",
    "videos_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Write a video of every Episode to DIR (MP4 with the video extra, else animated "
    "WebP), for Benchmarks that render.",
)
@click.option(
    "--video-frames",
    type=click.IntRange(min=2, max=10_000),
    default=VideoOptions().max_frames,
    show_default=True,
    help="Frames per video at most, spread evenly over the Episode.",
)
@click.option(
    "--video-max-bytes",
    type=click.IntRange(min=4096),
    default=VideoOptions().max_bytes,
    show_default=True,
    help="Bytes per video at most (fewer, then smaller frames until it fits).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object to stdout.")
def evaluate(
    program: str,
    benchmark_ref: str,
    params: dict[str, str],
    split: str,
    episodes: int,
    seed: int,
    jobs: int | None,
    episode_timeout: float,
    memory_mb: int,
    executor: str,
    ray_address: str | None,
    videos_dir: Path | None,
    video_frames: int,
    video_max_bytes: int,
    as_json: bool,
) -> None:
    """Evaluate PROGRAM, a directory with a policy.py, on a Benchmark.

    PROGRAM may be the word 'baseline' for the Benchmark's packaged baseline
    (write ./baseline for a directory of that name).

    A failed Episode counts at the Benchmark's failure score, and its return is shown as
    that score, marked so.

    With --json, episodes[] holds each Episode as the log and the exports name it
    (total_reward: the return as played; steps), and scored_return, the return the score
    counted it at (a failed Episode at the failure score); feedback is what an Agent is
    shown for this evaluation, whose content the Benchmark writes: for the Gymnasium ones,
    content.episodes[].return is the return as scored (a failed Episode at the failure
    score, none below it) and length its steps.
    """
    check_executor(executor, ray_address)
    try:
        # From the start: loading a Benchmark imports for a while, and Ctrl-C then is the same stop.
        with interruptible():
            benchmark = load(benchmark_ref, params)
            if videos_dir is not None:
                options = VideoOptions(
                    episodes="all", max_frames=video_frames, max_bytes=video_max_bytes
                )
                benchmark = _with_videos(benchmark, options)
            captured = _capture(_program_dir(program, benchmark))
            config = EvaluationConfig(
                split=split,
                episodes=episodes,
                seed=seed,
                jobs=jobs,
                episode_timeout=episode_timeout,
                limits=ResourceLimits(memory_mb=memory_mb),
            )
            planned = plan(benchmark, split, seed, episodes)
            with (
                open_evaluator(executor, ray_address) as evaluator,
                _progress(enabled=not as_json, total=len(planned)) as progress,
            ):
                result = evaluator.evaluate(
                    captured, benchmark, config, episodes=planned, progress=progress
                )
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if videos_dir is not None:
        _write_videos(result, videos_dir, quiet=as_json)
    if as_json:
        emit_json(result_view(result, benchmark))
    else:
        _print_result(result, benchmark)
    if result.episodes and result.failures == len(result.episodes):
        click.echo(
            f"every Episode failed ({len(result.episodes)} of {len(result.episodes)}): "
            f"the score is the failure score, not a measurement",
            err=True,
        )
        sys.exit(EXIT_ALL_FAILED)


evaluate.help = f"{inspect.cleandoc(evaluate.help or '')}\n\n{_EXIT_HELP}"


def _with_videos(benchmark: Benchmark, options: VideoOptions) -> Benchmark:
    with_videos = getattr(benchmark, "with_videos", None)
    if not callable(with_videos):
        raise CliError(f"{benchmark.spec.id} does not render videos")
    recording: Benchmark = with_videos(options)
    return recording


def _write_videos(result: EvaluationResult, folder: Path, *, quiet: bool) -> None:
    """Each Episode's video artifact into ``folder`` as ``episode-<n>.<suffix>``."""
    videos = [a for a in result.feedback.artifacts if a.name.startswith("video-episode-")]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for artifact in videos:
            (folder / artifact.name.removeprefix("video-")).write_bytes(artifact.data)
    except OSError as exc:
        raise CliError(f"cannot write videos to {folder}: {exc.strerror or exc}") from exc
    missing = len(result.episodes) - len(videos)
    if not quiet:
        note = f" ({missing} Episodes failed before a frame)" if missing else ""
        click.echo(f"wrote {len(videos)} videos to {folder}{note}", err=True)


def _program_dir(program: str, benchmark: Benchmark) -> Path:
    if program != "baseline":
        return Path(program)
    found = baseline_dir(benchmark)
    if found is None:
        raise CliError(f"{benchmark.spec.id} has no packaged baseline program")
    return found


def _capture(path: Path) -> Program:
    try:
        captured = Program.from_directory(path)
    except ProgramError as exc:
        # Some messages name only a file inside the program; say which program.
        message = str(exc)
        raise CliError(message if message.startswith(str(path)) else f"{path}: {message}") from exc
    if "policy.py" not in captured.paths():
        raise CliError(f"{path}: program has no policy.py")
    return captured


@contextlib.contextmanager
def _progress(*, enabled: bool, total: int) -> Iterator[Callable[[int, int], None] | None]:
    console = Console(stderr=True)
    # Off a terminal a transient bar would still leave a blank line on stderr.
    if not enabled or not console.is_terminal:
        yield None
        return
    columns = (TextColumn("Episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("Episodes", total=total)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def result_view(result: EvaluationResult, benchmark: Benchmark) -> dict[str, Any]:
    view = result.public()
    view["score_direction"] = benchmark.spec.score_direction
    scored = scored_returns(result, benchmark)
    for episode in view["episodes"]:
        episode["scored_return"] = scored.get(episode["index"])
    return view


def scored_returns(result: EvaluationResult, benchmark: Benchmark) -> dict[int, float | None]:
    """Each Episode's return as the score counted it, by index: as the Benchmark's Feedback
    lists it (``content.episodes[]`` with ``index`` and ``return``, as the Gymnasium ones
    do), else the failure score for a failed Episode and the return as played for another."""
    listed: dict[int, float] = {}
    content = result.feedback.content
    for entry in content.get("episodes", ()) if isinstance(content, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("index"), int):
            value = entry.get("return")
            if isinstance(value, int | float) and not isinstance(value, bool):
                listed[entry["index"]] = float(value)
    floor = benchmark.spec.failure_score
    return {
        e.index: listed.get(e.index, e.total_reward if e.status == "ok" else floor)
        for e in result.episodes
    }


def _return_cell(episode: Any, scored: float | None) -> str:
    """The return an Episode is shown with: a failed one at the score it counted at."""
    if episode.status != "ok":
        return "-" if scored is None else f"{human(scored)} (failure score)"
    if scored is not None and scored != episode.total_reward:
        return f"{human(episode.total_reward)} (scored {human(scored)})"
    return human(episode.total_reward)


def _print_result(result: EvaluationResult, benchmark: Benchmark) -> None:
    """The Episodes (at most ``EPISODE_ROWS``, failed ones first), then the summary, so
    the score is the last thing on the screen however many Episodes ran."""
    from rich.text import Text

    console = Console()
    episodes = result.episodes
    scored = scored_returns(result, benchmark)
    shown = list(episodes)
    if len(episodes) > EPISODE_ROWS:
        failed = [e for e in episodes if e.status != "ok"][:EPISODE_ROWS]
        rest = [e for e in episodes if e.status == "ok"][: EPISODE_ROWS - len(failed)]
        shown = sorted([*failed, *rest], key=lambda e: e.index)
    print_table(
        console,
        ["episode", "status", "return", "steps", "failure"],
        [
            [
                str(e.index),
                Text(e.status, style="" if e.status == "ok" else "red"),
                _return_cell(e, scored.get(e.index)),
                str(e.steps),
                clip(_last_line(e.failure or ""), FAILURE_CHARS) or "-",
            ]
            for e in shown
        ],
        keys=(0, 1, 2),  # a status or a return read whole, never wrapped
    )
    if len(shown) < len(episodes):
        hidden = len(episodes) - len(shown)
        failed_hidden = sum(e.status != "ok" for e in episodes) - sum(
            e.status != "ok" for e in shown
        )
        what = f"{failed_hidden} of them failed" if failed_hidden else "all ok"
        console.print(
            f"… {hidden} more Episode{'s' if hidden != 1 else ''} ({what}); --json lists every one",
            markup=False,
            highlight=False,
        )
    console.print()
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold", no_wrap=True)
    summary.add_column(overflow="fold")
    failures = f"[red]{result.failures}[/]" if result.failures else "0"
    for key, value in (
        ("benchmark", result.benchmark_id),
        ("program", result.program_digest),
        ("split", result.split),
        ("failures", f"{failures} of {len(episodes)} Episodes"),
        ("containment", result.containment),
        ("jobs", str(result.jobs)),
        ("duration", f"{result.duration_s:.2f}s"),
        ("score", f"{human(result.feedback.score)} ({benchmark.spec.score_direction})"),
    ):
        summary.add_row(key, value)
    console.print(summary)


def _last_line(text: str) -> str:
    """A traceback's last line names the exception; its first lines only say where."""
    lines = [line for line in text.splitlines() if line.strip()]
    return one_line(lines[-1]) if lines else ""
