"""evaluate(): one Program over a bounded list of Episodes, in parallel, in Episode order.

Scheduling: the calling thread plays Episodes itself; with J jobs, J - 1
runner processes (kept by the Evaluator across evaluations) play beside it,
each driving its own Environments, all taking the next Episode from one queue.
Runners boot while the fork server starts, and one still booting when the
queue runs dry is not waited for, so more jobs never cost a slow start. The
calling thread, each runner and the policies each starts share one pinned
core, distinct per job, which keeps the per-step round trip on one CPU's
caches and run queue. Results are collected by Episode index, so they are
identical for any number of jobs.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence

from evopolicygym.benchmark import Benchmark, EpisodeRecord
from evopolicygym.evaluation.config import (
    EpisodeSummary,
    EvaluationConfig,
    EvaluationError,
    EvaluationResult,
    PlannedEpisode,
    plan_episodes,
    require_failure_score,
)
from evopolicygym.evaluation.episode import EpisodeRunner
from evopolicygym.evaluation.forkserver import ForkServer
from evopolicygym.evaluation.runner import RunnerProcess
from evopolicygym.hostdirs import remove_tree
from evopolicygym.program import Program, ProgramError

__all__ = ["Evaluator", "evaluate", "stop_all"]

Progress = Callable[[int, int], None]


def _available_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


@contextlib.contextmanager
def pinned_to(cpu: int | None) -> Iterator[None]:
    """Pin the calling thread (Linux affinity is per thread) and restore it afterwards."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# Every Evaluator of this process. A list copied in one step, not a WeakSet, whose iteration
# fails when another thread adds meanwhile; the lock orders adders only (never the handler).
_live: list[weakref.ref[Evaluator]] = []
_live_lock = threading.Lock()


def stop_all() -> None:
    """Stop every evaluation under way in this process, in whatever thread (the Host's stop on
    a signal; safe to call from a signal handler): see ``Evaluator.stop``."""
    for ref in _live[:]:
        evaluator = ref()
        if evaluator is not None:
            evaluator.stop()


class Evaluator:
    """Evaluates Programs; keeps one policy fork server alive across evaluations."""

    def __init__(self) -> None:
        self._fork_server: ForkServer | None = None
        self._server_lock = threading.Lock()  # the fork server is started once, by one thread
        self._warming: threading.Thread | None = None
        self._runner_pool: list[RunnerProcess] = []
        self._stopped = False  # a plain flag: stop() runs in signal handlers, so takes no lock
        with _live_lock:
            _live[:] = [*(r for r in _live if r() is not None), weakref.ref(self)]

    def stop(self) -> None:
        """Make the evaluations under way end soon with EvaluationError, and any later one at
        once: between Episodes, and mid-Episode where runner processes play them (their
        channels are shut, which they take as the end). Close still cleans up."""
        self._stopped = True
        for runner in list(self._runner_pool):
            runner.interrupt()

    def _check_stopped(self) -> None:
        if self._stopped:
            raise EvaluationError("the evaluation was stopped: the Host is stopping")

    @property
    def fork_server(self) -> ForkServer:
        with self._server_lock:
            if self._fork_server is None:
                self._fork_server = ForkServer()
            return self._fork_server

    def warm(self) -> None:
        """Start the fork server now, in the background, so that the first evaluation finds
        it ready: a Run calls this while its Agent starts. A start that fails here is not
        lost: the first evaluation starts the server itself and raises what stops it."""
        if self._warming is not None or self._fork_server is not None:
            return

        def start() -> None:
            with contextlib.suppress(Exception):
                self.fork_server  # noqa: B018 (started by the property)

        self._warming = threading.Thread(target=start, name="evopolicy-warm", daemon=True)
        self._warming.start()

    def close(self) -> None:
        if self._warming is not None:
            self._warming.join()  # a server it is starting is closed below, not left behind
            self._warming = None
        for runner in self._runner_pool:
            runner.close()
        self._runner_pool = []
        if self._fork_server is not None:
            self._fork_server.close()
            self._fork_server = None

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepared(
        self,
        program: Program,
        benchmark: Benchmark,
        config: EvaluationConfig | None,
        episodes: Sequence[PlannedEpisode] | None,
    ) -> tuple[EvaluationConfig, list[PlannedEpisode]]:
        """What every executor checks and settles before an evaluation: not stopped, a
        Benchmark with a failure score, a program with a policy.py, the Episodes to play."""
        self._check_stopped()
        config = config or EvaluationConfig()
        require_failure_score(benchmark)
        if "policy.py" not in program.paths():
            raise ProgramError("program has no policy.py at its top level")
        if episodes is None:
            episodes = plan_episodes(benchmark, config.split, config.seed, config.episodes)
        return config, list(episodes)

    def evaluate(
        self,
        program: Program,
        benchmark: Benchmark,
        config: EvaluationConfig | None = None,
        *,
        episodes: Sequence[PlannedEpisode] | None = None,
        progress: Progress | None = None,
    ) -> EvaluationResult:
        """Run ``program`` on ``episodes`` (default: planned from ``config``) and score it.

        Policy failures are scored outcomes; a fault of the Environment, the
        Benchmark or the Host raises EvaluationError.
        """
        config, episodes = self._prepared(program, benchmark, config, episodes)
        cpus = _available_cpus()
        jobs = max(1, min(config.jobs or len(cpus), len(episodes) or 1))
        started = time.monotonic()
        blob = b""
        if jobs > 1:
            try:
                blob = pickle.dumps(benchmark)
            except Exception as exc:
                raise EvaluationError(
                    f"{benchmark.spec.id}: the Benchmark must be picklable to run with "
                    f"jobs > 1 ({exc})"
                ) from exc
            # Runners boot (a fresh interpreter each) while the fork server starts.
            self._runners(jobs - 1, cpus if config.pin_cpus else None, blob)
        fork_server = self.fork_server
        workdir = tempfile.mkdtemp(prefix="eval-", dir=fork_server.work_dir)
        try:
            program_dir = str(program.write_to(os.path.join(workdir, "program")))
            make_read_only(program_dir)
            # Under namespaces containment each policy's scratch is a tmpfs in its own jail,
            # and the Host keeps no directory for it.
            scratch_root = ""
            if fork_server.containment != "namespaces":
                scratch_root = os.path.join(workdir, "scratch")
                os.mkdir(scratch_root)
            records = self._run_episodes(
                benchmark, blob, program_dir, scratch_root, config, episodes, cpus, jobs, progress
            )
        finally:
            remove_tree(workdir)
        return scored(
            program,
            benchmark,
            config,
            episodes,
            records,
            containment=fork_server.containment,
            enforced=fork_server.enforced,
            jobs=jobs,
            started=started,
        )

    def _runners(self, count: int, cpus: list[int] | None, blob: bytes) -> list[RunnerProcess]:
        """The pool's first ``count`` runners, started now where missing (they boot while the
        caller does other work). Runner k plays on the CPU after the Host thread's."""
        self._runner_pool = [r for r in self._runner_pool if r.alive]
        while len(self._runner_pool) < count:
            slot = len(self._runner_pool) + 1
            self._runner_pool.append(RunnerProcess(cpus[slot % len(cpus)] if cpus else None, blob))
        return self._runner_pool[:count]

    def _run_episodes(
        self,
        benchmark: Benchmark,
        blob: bytes,
        program_dir: str,
        scratch_root: str,
        config: EvaluationConfig,
        episodes: Sequence[PlannedEpisode],
        cpus: list[int],
        jobs: int,
        progress: Progress | None,
    ) -> list[EpisodeRecord]:
        """Play ``episodes`` in the calling thread and, with ``jobs`` > 1, in ``jobs - 1``
        runner processes beside it, all taking the next Episode from one queue. The calling
        thread starts at once; a runner joins when it has booted, and one still booting
        when the queue runs dry is not waited for (it stays in the pool for the next call)."""
        results: list[EpisodeRecord | None] = [None] * len(episodes)
        queue = list(range(len(episodes)))
        queue.reverse()
        lock = threading.Lock()
        errors: list[BaseException] = []
        own_fault = EvaluationError("the Host's Episode loop failed")
        done = [0]

        def take() -> int | None:
            with lock:
                if errors or not queue or self._stopped:
                    return None
                return queue.pop()

        def finish(i: int, record: EpisodeRecord) -> None:
            with lock:
                results[i] = record
                done[0] += 1
                if progress:
                    progress(done[0], len(episodes))

        def idle() -> bool:
            return bool(errors) or not queue or self._stopped

        def drive(slot: int, runner: RunnerProcess) -> None:
            cpu = cpus[slot % len(cpus)] if config.pin_cpus else None
            try:
                if not runner.wait_ready(idle):
                    return
                runner.call(
                    "setup",
                    list(sys.path),
                    blob,
                    self.fork_server.address,
                    program_dir,
                    scratch_root,
                    config,
                    cpu,
                )
                try:
                    while (i := take()) is not None:
                        finish(i, runner.call("run", episodes[i]))
                finally:
                    if runner.alive:
                        runner.call("release")
            except BaseException as exc:
                with lock:
                    errors.append(exc)

        runners = (
            self._runners(jobs - 1, cpus if config.pin_cpus else None, blob) if jobs > 1 else []
        )
        # Started before the calling thread pins itself: they inherit its affinity.
        threads = [
            threading.Thread(target=drive, args=(slot + 1, r), daemon=True)
            for slot, r in enumerate(runners)
        ]
        for t in threads:
            t.start()
        try:
            cpu = cpus[0] if config.pin_cpus else None
            with self.fork_server.connect() as client, pinned_to(cpu):
                runner = EpisodeRunner(benchmark, client, program_dir, scratch_root, config, cpu)
                try:
                    while (i := take()) is not None:
                        runner.prespawn = bool(queue)
                        finish(i, runner.run(episodes[i]))
                finally:
                    runner.close()
        except BaseException:
            with lock:
                errors.append(own_fault)  # the runners take no further Episode
            raise  # as it is: the calling thread's own fault, as with one job
        finally:
            for t in threads:
                t.join()
        self._check_stopped()  # what failed meanwhile is the stop's doing
        if errors:
            first = errors[0]
            if isinstance(first, EvaluationError):
                raise first
            raise EvaluationError(f"an Episode runner failed: {first!r}") from first
        return [r for r in results if r is not None]


def scored(
    program: Program,
    benchmark: Benchmark,
    config: EvaluationConfig,
    episodes: Sequence[PlannedEpisode],
    records: list[EpisodeRecord],
    *,
    containment: str,
    enforced: tuple[str, ...],
    jobs: int,
    started: float,
) -> EvaluationResult:
    """Score ``records`` (in Episode order) and build the result: one place for every
    executor, so where Episodes ran never changes what is returned."""
    try:
        feedback = benchmark.score(records)
    except Exception as exc:
        raise EvaluationError(f"{benchmark.spec.id}: score() failed: {exc!r}") from exc
    return EvaluationResult(
        benchmark_id=benchmark.spec.id,
        environment_digest=benchmark.spec.environment_digest,
        program_digest=program.digest,
        split=episodes[0].spec.split if episodes else config.split,
        feedback=feedback,
        episodes=tuple(
            EpisodeSummary(
                index=r.spec.index,
                status=r.status,
                total_reward=r.total_reward,
                steps=r.steps,
                failure=r.failure,
                duration_s=r.duration_s,
            )
            for r in records
        ),
        records=tuple(records),
        containment=containment,
        enforced=_enforced(enforced, config.pin_cpus),
        jobs=jobs,
        duration_s=time.monotonic() - started,
    )


def _enforced(server: tuple[str, ...], pinned: bool) -> tuple[str, ...]:
    """The fork server's limits, and the pinning when the policy cannot undo it."""
    return (*server, "pinned-core") if pinned and "seccomp" in server else server


def make_read_only(directory: str) -> None:
    """Drop write bits; the sandbox also mounts it read-only where it can."""
    for root, dirs, files in os.walk(directory):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o555)
    os.chmod(directory, 0o555)


def evaluate(
    program: Program,
    benchmark: Benchmark,
    config: EvaluationConfig | None = None,
    *,
    episodes: Sequence[PlannedEpisode] | None = None,
    progress: Progress | None = None,
) -> EvaluationResult:
    """One-shot evaluation with a private fork server; use Evaluator to reuse one."""
    with Evaluator() as evaluator:
        return evaluator.evaluate(program, benchmark, config, episodes=episodes, progress=progress)
