"""The Ray executor: an Evaluator whose Episodes are played by Ray actors, on any node.

Each actor (one per worker slot, one CPU) holds a local Evaluator, so its Episodes run in
the same contained engine as the local executor's (its own fork server and sandbox, on
the node it lands on): the actor plays whole Episodes and hands back their EpisodeRecords.
The driver deals the Episodes out dynamically, a shrinking chunk at a time to whichever
actor is free, gathers the records by Episode index and scores them here, so the result
is the local executor's for the same Episodes whatever the placement.

The Program and the Benchmark travel once per evaluation through Ray's object store
(content-addressed: the Program checked against its digest where it lands, the pickled
Benchmark kept per actor by its digest). An actor whose policies would be contained less
than this machine contains them refuses its Episodes: fail closed. An actor that dies
mid-Episode (its process or node lost) is the Host's fault, never the policy's: its
Episodes go to another actor once, and a second loss aborts the evaluation.

Nothing here imports Ray at module level: ``ray`` is imported when a RayEvaluator is made.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import math
import os
import pickle
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from evopolicygym.benchmark import Benchmark, EpisodeRecord
from evopolicygym.evaluation.config import (
    EvaluationConfig,
    EvaluationError,
    EvaluationResult,
    PlannedEpisode,
)
from evopolicygym.evaluation.engine import (
    Evaluator,
    Progress,
    make_read_only,
    pinned_to,
    scored,
)
from evopolicygym.evaluation.episode import EpisodeRunner
from evopolicygym.evaluation.forkserver import ForkServer, ForkServerClient
from evopolicygym.hostdirs import remove_tree
from evopolicygym.program import Program

__all__ = ["RAY_MISSING", "EpisodeWorker", "RayEvaluator", "import_ray"]

RAY_MISSING = "the Ray executor needs the ray extra, which is not installed: uv sync --extra ray"
_CONTAINMENT_RANK = {"process-group": 0, "namespaces": 1}
_DERIVED = {"pinned-core"}  # added per evaluation from the pinning, not a property of a server
_CONNECT_S = 10.0  # for a cluster's head to accept a connection
_POLL_S = 0.1  # how often the driver looks at stop() while waiting for actors
# While no worker can be placed (every CPU of the cluster taken) an evaluation waits this
# long for one, then fails as a Host fault rather than hang its Run.
_START_TIMEOUT_S = 600.0
# Workers idle this long give their CPUs back to the cluster (a Run whose Agent is thinking
# holds none); the next evaluation starts new ones, a second or two each.
IDLE_S = 60.0
_CACHED_BENCHMARKS = 4  # unpickled Benchmarks an actor keeps, by the digest of their pickle


_UV_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def import_ray() -> Any:
    """The ``ray`` module, or EvaluationError saying how to install it."""
    # Ray otherwise sees a driver started by `uv run` and has every worker start through
    # `uv run` too, from a copy of the current directory uploaded to the cluster: slow, and
    # wrong for a Host whose directory is a store or an experiment. Workers use the
    # interpreter and packages installed on their node, as the Host does.
    os.environ.setdefault(_UV_HOOK, "0")
    try:
        import ray
    except ImportError as exc:
        raise EvaluationError(RAY_MISSING) from exc
    return ray


# --------------------------------------------------------------------------- the actor side


class EpisodeWorker:
    """What one Ray actor does: plays the Episodes it is handed, in a local contained engine.

    Trusted Host code in a Ray worker process; policies never see it. One evaluation at a
    time: ``setup`` (the Program written read-only, an EpisodeRunner on this actor's fork
    server), ``run`` for each chunk of Episodes, ``release``.
    """

    def __init__(self) -> None:
        self._evaluator = Evaluator()
        self._benchmarks: collections.OrderedDict[str, Benchmark] = collections.OrderedDict()
        self._runner: EpisodeRunner | None = None
        self._client: ForkServerClient | None = None
        self._workdir: str | None = None
        self._cpu: int | None = None

    def hello(self) -> dict[str, Any]:
        """Where this actor runs and how it contains policies (its fork server started now)."""
        import socket

        import ray

        server = self._evaluator.fork_server
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "cpus": sorted(os.sched_getaffinity(0)),
            "containment": server.containment,
            "enforced": list(server.enforced),
        }

    def setup(
        self,
        benchmark_key: str,
        benchmark_ref: list[Any],
        files: tuple[tuple[str, bytes], ...],
        digest: str,
        config: EvaluationConfig,
        cpu: int | None,
        path: list[str],
        required: tuple[str, tuple[str, ...]],
    ) -> tuple[str, tuple[str, ...]]:
        """Prepare one evaluation; its containment and enforced limits. Refuses (fail closed)
        where policies would be contained less than ``required`` (the driver's own)."""
        self.release()
        server = self._evaluator.fork_server
        _check_containment(server.containment, server.enforced, required, _where())
        benchmark = self._benchmarks.get(benchmark_key)
        if benchmark is None:
            import ray

            # The driver's import path, so a Benchmark defined in its modules unpickles here.
            sys.path[:] = [p for p in path if p] + [p for p in sys.path if p not in path]
            (blob,) = ray.get(benchmark_ref)
            benchmark = pickle.loads(blob)
            self._benchmarks[benchmark_key] = benchmark
            while len(self._benchmarks) > _CACHED_BENCHMARKS:
                self._benchmarks.popitem(last=False)
        else:
            self._benchmarks.move_to_end(benchmark_key)
        program = Program.from_files(dict(files))
        if program.digest != digest:
            raise EvaluationError(
                f"the Program arrived at {_where()} as {program.digest}, not {digest}"
            )
        workdir = tempfile.mkdtemp(prefix="eval-", dir=server.work_dir)
        self._workdir = workdir
        program_dir = str(program.write_to(os.path.join(workdir, "program")))
        make_read_only(program_dir)
        scratch_root = os.path.join(workdir, "scratch")
        os.mkdir(scratch_root)
        self._client = server.connect()
        self._cpu = cpu
        self._runner = EpisodeRunner(
            benchmark, self._client, program_dir, scratch_root, config, cpu
        )
        return server.containment, server.enforced

    def run(self, episodes: list[PlannedEpisode], more: bool) -> list[EpisodeRecord]:
        """Play ``episodes`` in order; with ``more``, start the next policy process ahead."""
        runner = self._runner
        if runner is None:
            raise EvaluationError("internal: Episodes handed to a Ray worker before its setup")
        records = []
        with pinned_to(self._cpu):
            for i, planned in enumerate(episodes):
                runner.prespawn = more or i + 1 < len(episodes)
                records.append(runner.run(planned))
        return records

    def release(self) -> None:
        """End the evaluation: its spare policy process stopped, its directory removed."""
        runner, self._runner = self._runner, None
        client, self._client = self._client, None
        workdir, self._workdir = self._workdir, None
        try:
            if runner is not None:
                runner.close()
        finally:
            if client is not None:
                client.close()
            if workdir is not None:
                remove_tree(workdir)

    def shutdown(self) -> None:
        try:
            self.release()
        finally:
            self._evaluator.close()


def _where() -> str:
    import socket

    return f"the Ray worker on {socket.gethostname()} (pid {os.getpid()})"


def _check_containment(
    containment: str, enforced: Sequence[str], required: tuple[str, tuple[str, ...]], where: str
) -> None:
    need_level, need_limits = required
    if _CONTAINMENT_RANK.get(containment, -1) < _CONTAINMENT_RANK.get(need_level, 0):
        raise EvaluationError(
            f"{where} contains policies by {containment} only, where this Host contains them by "
            f"{need_level}: refusing to play Episodes there"
        )
    missing = [limit for limit in need_limits if limit not in enforced and limit not in _DERIVED]
    if missing:
        raise EvaluationError(
            f"{where} cannot enforce {', '.join(missing)}, which this Host enforces on policies: "
            "refusing to play Episodes there"
        )


# --------------------------------------------------------------------------- the driver side


class _Slot:
    """One actor of the pool, as the driver knows it."""

    __slots__ = ("actor", "cpu", "hello", "node", "started")

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.hello: Any = None  # the ObjectRef of its first call, until it answered
        self.node: str | None = None
        self.cpu: int | None = None
        self.started = False  # answered its hello: placed and running


class RayEvaluator(Evaluator):
    """An Evaluator whose Episodes run on Ray actors: ``evaluate``, ``stop`` and ``close`` as
    the local one's, and the same results for the same Episodes.

    ``address`` is a Ray cluster's (``ray.init(address=...)``); None starts a local Ray
    unless this process is already connected to one (then it is used as it is). The actors
    are kept across evaluations; ``config.jobs`` is how many play at once (default: one per
    CPU of the cluster).
    """

    def __init__(self, address: str | None = None) -> None:
        super().__init__()
        ray = import_ray()
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            if address is None and "RAY_ADDRESS" not in os.environ:
                options["include_dashboard"] = False  # a local instance: nobody to show it to
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            _check_reachable(address, where)
            try:
                ray.init(address=address, **options)
            except Exception as exc:
                raise EvaluationError(
                    f"cannot connect to {where}: {' '.join(str(exc).split())}"
                ) from exc
            self._owns_ray = True
        self._slots: list[_Slot] = []
        self._pool_lock = threading.Lock()  # the pool: one evaluation, or the idle release
        self._idle: threading.Timer | None = None
        self._worker_class: Any = None
        self._local: tuple[str, tuple[str, ...]] | None = None
        self._benchmark_refs: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> RayEvaluator:
        return self

    def warm(self) -> None:
        """Nothing to start on this machine: the workers start their own fork servers."""

    def stop(self) -> None:
        """Make the evaluation under way end soon (its actors are killed by the thread that
        waits on them) and any later one at once. Safe in a signal handler: no Ray call."""
        self._stopped = True

    def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        with self._pool_lock:
            self._shrink()
        self._benchmark_refs.clear()
        super().close()
        if self._owns_ray:
            self._owns_ray = False
            with contextlib.suppress(Exception):
                self._ray.shutdown()

    def _shrink(self) -> None:
        """Stop every worker (each removes its directories and its fork server first)."""
        slots, self._slots = self._slots, []
        ray = self._ray
        ends = []
        for slot in slots:
            if slot.started:  # one never placed has nothing to clean up, and would not answer
                with contextlib.suppress(Exception):
                    ends.append(slot.actor.shutdown.remote())
        with contextlib.suppress(Exception):
            ray.wait(ends, num_returns=len(ends), timeout=10)
        for slot in slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor)

    def _release_when_idle(self) -> None:
        def release() -> None:
            if self._pool_lock.acquire(blocking=False):  # an evaluation under way keeps them
                try:
                    self._shrink()
                finally:
                    self._pool_lock.release()

        self._idle = threading.Timer(IDLE_S, release)
        self._idle.daemon = True
        self._idle.start()

    # ------------------------------------------------------------------ evaluate

    def evaluate(
        self,
        program: Program,
        benchmark: Benchmark,
        config: EvaluationConfig | None = None,
        *,
        episodes: Sequence[PlannedEpisode] | None = None,
        progress: Progress | None = None,
    ) -> EvaluationResult:
        """Run ``program`` on ``episodes`` (default: planned from ``config``) on Ray workers
        and score it here. Policy failures are scored outcomes; a fault of the Environment,
        the Benchmark or the Host (a worker lost twice, a worker that cannot contain the
        policy) raises EvaluationError."""
        config, episodes = self._prepared(program, benchmark, config, episodes)
        started = time.monotonic()
        required = self._required()
        if episodes:
            if self._idle is not None:
                self._idle.cancel()
            with self._pool_lock:
                try:
                    records, containment, enforced, jobs = self._play(
                        program, benchmark, config, episodes, required, progress
                    )
                finally:
                    self._release_when_idle()
        else:
            records, (containment, enforced), jobs = [], required, 1
        return scored(
            program,
            benchmark,
            config,
            episodes,
            records,
            containment=containment,
            enforced=enforced,
            jobs=jobs,
            started=started,
        )

    def _required(self) -> tuple[str, tuple[str, ...]]:
        """How this machine contains policies: what every worker must match or better. Probed
        once with a fork server of its own, stopped at once."""
        if self._local is None:
            with ForkServer() as server:
                self._local = (server.containment, tuple(server.enforced))
        return self._local

    def _workers(self) -> Any:
        if self._worker_class is None:
            options: dict[str, Any] = {
                "num_cpus": 1,
                "max_restarts": 0,
                "max_task_retries": 0,
                "scheduling_strategy": "SPREAD",
            }
            forced = {
                name: os.environ[name] for name in ("EVOPOLICY_CONTAINMENT",) if name in os.environ
            }
            if forced:  # the containment this Host was told to use, on every worker too
                options["runtime_env"] = {"env_vars": forced}
            self._worker_class = self._ray.remote(**options)(EpisodeWorker)
        return self._worker_class

    def _cluster_cpus(self) -> int:
        with contextlib.suppress(Exception):
            return max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return 1

    def _grow(self, count: int) -> None:
        """Start actors until the pool holds ``count``; each says hello when placed."""
        worker = self._workers()
        while len(self._slots) < count:
            slot = _Slot(worker.remote())
            slot.hello = slot.actor.hello.remote()
            self._slots.append(slot)

    def _place(self, slot: _Slot, hello: dict[str, Any], pin: bool) -> None:
        """Record where ``slot`` runs and give it a core of its node no other slot there has."""
        slot.node = hello["node"]
        slot.started = True
        slot.hello = None
        cpus: list[int] = hello["cpus"] or [0]
        taken = {
            s.cpu
            for s in self._slots
            if s is not slot and s.node == slot.node and s.cpu is not None
        }
        free = [c for c in cpus if c not in taken]
        slot.cpu = (free[0] if free else cpus[len(taken) % len(cpus)]) if pin else None

    def _drop(self, slot: _Slot) -> None:
        if slot in self._slots:
            self._slots.remove(slot)
        with contextlib.suppress(Exception):
            self._ray.kill(slot.actor)

    def _play(
        self,
        program: Program,
        benchmark: Benchmark,
        config: EvaluationConfig,
        episodes: list[PlannedEpisode],
        required: tuple[str, tuple[str, ...]],
        progress: Progress | None,
    ) -> tuple[list[EpisodeRecord], str, tuple[str, ...], int]:
        ray = self._ray
        try:
            blob = pickle.dumps(benchmark)
        except Exception as exc:
            raise EvaluationError(
                f"{benchmark.spec.id}: the Benchmark must be picklable to run on Ray ({exc})"
            ) from exc
        benchmark_key = hashlib.sha256(blob).hexdigest()
        if benchmark_key not in self._benchmark_refs:
            # The last one only: a Run has one Benchmark.
            self._benchmark_refs = {benchmark_key: ray.put(blob)}
        setup = _Setup(
            benchmark_key=benchmark_key,
            # Nested, so an actor fetches it only where it has not cached it.
            benchmark_ref=[self._benchmark_refs[benchmark_key]],
            files_ref=ray.put(program.files),
            digest=program.digest,
            config=config,
            path=list(sys.path),
            required=required,
        )
        jobs = max(1, min(config.jobs or self._cluster_cpus(), len(episodes)))
        self._grow(jobs)
        return _Dealing(self, self._slots[:jobs], episodes, setup, progress).play()


class _Setup(NamedTuple):
    """What every actor is set up with for one evaluation (see ``EpisodeWorker.setup``)."""

    benchmark_key: str
    benchmark_ref: list[Any]
    files_ref: Any
    digest: str
    config: EvaluationConfig
    path: list[str]
    required: tuple[str, tuple[str, ...]]


class _Dealing:
    """One evaluation's Episodes dealt out to the pool's actors: what is queued, in flight,
    played and lost, and what each actor's setup reported. An actor lost mid-Episode is
    replaced and its Episodes dealt again, once."""

    def __init__(
        self,
        pool: RayEvaluator,
        slots: list[_Slot],
        episodes: list[PlannedEpisode],
        setup: _Setup,
        progress: Progress | None,
    ) -> None:
        self.pool = pool
        self.slots = slots
        self.episodes = episodes
        self.setup_with = setup
        self.progress = progress
        self.total = len(episodes)
        self.queue: collections.deque[int] = collections.deque(range(self.total))
        self.results: list[EpisodeRecord | None] = [None] * self.total
        self.lost: set[int] = set()  # Episodes whose worker died under them once
        self.done = 0
        # In flight: ObjectRef -> (kind, slot, Episode indices)
        self.pending: dict[Any, tuple[str, _Slot, list[int]]] = {}
        self.setups: dict[int, Any] = {}  # id(slot) -> its setup's ObjectRef
        self.reports: list[tuple[str, tuple[str, ...]]] = []
        self.idle: list[_Slot] = []
        self.waiting_since = time.monotonic()

    def play(self) -> tuple[list[EpisodeRecord], str, tuple[str, ...], int]:
        """Every Episode's record, the weakest containment and the limits all actors
        enforced, and how many actors played."""
        for slot in self.slots:
            if slot.started:
                self.begin(slot)
            else:
                self.pending[slot.hello] = ("hello", slot, [])
        try:
            while self.done < self.total:
                self.next_answer()
        except BaseException:
            # Whatever is still playing is abandoned: those actors go, the next evaluation
            # starts new ones.
            for _, slot, _ in list(self.pending.values()):
                self.pool._drop(slot)
            raise
        return self.finish()

    def setup(self, slot: _Slot) -> None:
        s = self.setup_with
        ref = slot.actor.setup.remote(
            s.benchmark_key,
            s.benchmark_ref,
            s.files_ref,
            s.digest,
            s.config,
            slot.cpu,
            s.path,
            s.required,
        )
        self.setups[id(slot)] = ref
        self.pending[ref] = ("setup", slot, [])

    def deal(self, slot: _Slot) -> None:
        """Hand ``slot`` the next chunk: a share of what is left that shrinks as it runs
        out (guided scheduling), so calls are few and the last ones short."""
        queue = self.queue
        if not queue:
            self.idle.append(slot)
            return
        size = max(1, math.ceil(len(queue) / (2 * max(1, len(self.active())))))
        chunk = [queue.popleft() for _ in range(min(size, len(queue)))]
        ref = slot.actor.run.remote([self.episodes[i] for i in chunk], bool(queue))
        self.pending[ref] = ("run", slot, chunk)

    def active(self) -> list[_Slot]:
        return [s for s in self.slots if id(s) in self.setups]

    def begin(self, slot: _Slot) -> None:
        self.setup(slot)
        self.deal(slot)

    def replace(self, dead: _Slot) -> None:
        """A lost actor: out of the pool, and a new one asked for in its place."""
        pool = self.pool
        pool._drop(dead)
        if dead in self.slots:
            self.slots.remove(dead)
        self.setups.pop(id(dead), None)
        for ref, (_, owner, _) in list(self.pending.items()):
            if owner is dead:
                del self.pending[ref]
        pool._grow(len(pool._slots) + 1)
        fresh = pool._slots[-1]
        self.slots.append(fresh)
        self.pending[fresh.hello] = ("hello", fresh, [])
        self.waiting_since = time.monotonic()

    def lose(self, chunk: list[int], why: BaseException) -> None:
        for i in chunk:
            if i in self.lost:
                raise EvaluationError(
                    f"Episode {self.episodes[i].spec.index} was lost twice with the Ray workers "
                    f"playing it ({' '.join(str(why).split())[:300]})"
                ) from why
            self.lost.add(i)
        self.queue.extendleft(reversed(chunk))

    def next_answer(self) -> None:
        """Wait a while for one answer from an actor, and act on it."""
        from ray.exceptions import GetTimeoutError, RayTaskError

        ray = self.pool._ray
        if self.pool._stopped:
            raise EvaluationError("the evaluation was stopped: the Host is stopping")
        if not self.pending:
            raise EvaluationError("internal: no Ray worker has Episodes to play")
        ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=_POLL_S)
        if not ready:
            if not any(kind != "hello" for kind, _, _ in self.pending.values()) and (
                time.monotonic() - self.waiting_since > _START_TIMEOUT_S
            ):
                raise EvaluationError(
                    f"no Ray worker could be placed within {_START_TIMEOUT_S:g}s (the cluster "
                    f"has {self.pool._cluster_cpus()} CPUs): is every node busy or gone?"
                )
            return
        ref = ready[0]
        kind, slot, chunk = self.pending.pop(ref)
        try:
            value = ray.get(ref)
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            if isinstance(cause, EvaluationError):
                raise EvaluationError(str(cause)) from None
            raise EvaluationError(f"a Ray worker failed: {cause!r}") from None
        except GetTimeoutError:  # not ready after all: wait again
            self.pending[ref] = (kind, slot, chunk)
            return
        except Exception as exc:
            self.failed(kind, slot, chunk, exc)
            return
        self.answered(kind, slot, chunk, value)

    def failed(self, kind: str, slot: _Slot, chunk: list[int], exc: Exception) -> None:
        """A call that raised: an actor lost mid-evaluation has its Episodes dealt again."""
        if not _lost(exc):
            raise EvaluationError(f"Ray failed: {' '.join(str(exc).split())[:500]}") from exc
        if kind == "hello":  # never started, so it played nothing: no retry
            raise EvaluationError(
                f"a Ray worker could not start: {' '.join(str(exc).split())[:500]}"
            ) from exc
        # The actor, its process or its node is gone mid-evaluation: the Host's
        # fault, so its Episodes go to another actor (once).
        self.replace(slot)
        self.lose(chunk, exc)
        while self.idle and self.queue:
            self.deal(self.idle.pop())

    def answered(self, kind: str, slot: _Slot, chunk: list[int], value: Any) -> None:
        if kind == "hello":
            self.pool._place(slot, value, self.setup_with.config.pin_cpus)
            self.begin(slot)
        elif kind == "setup":
            self.reports.append(value)
        else:
            for i, record in zip(chunk, value, strict=True):
                self.results[i] = record
            self.done += len(chunk)
            if self.progress is not None:
                self.progress(self.done, self.total)
            self.deal(slot)

    def finish(self) -> tuple[list[EpisodeRecord], str, tuple[str, ...], int]:
        reports = self.reports
        # Setups whose answer came after their Episodes' (all are in by now).
        for kind, slot, _ in list(self.pending.values()):
            if kind == "setup":
                reports.append(self.pool._ray.get(self.setups[id(slot)]))
        for slot in self.active():
            slot.actor.release.remote()  # ordered before its next setup; nobody waits
        self.pool._check_stopped()
        containment = min((c for c, _ in reports), key=lambda c: _CONTAINMENT_RANK.get(c, -1))
        common = [limit for limit in reports[0][1] if all(limit in e for _, e in reports)]
        records = [r for r in self.results if r is not None]
        return records, containment, tuple(common), len(self.active())


def _check_reachable(address: str | None, where: str) -> None:
    """Refuse a cluster whose head does not answer, at once: ray.init would retry forever.
    ``address`` as ray.init resolves it (None: $RAY_ADDRESS, else the cluster `ray start`
    runs on this machine, else none, and a local one is started)."""
    import socket

    resolved: str | None = address
    with contextlib.suppress(Exception):  # Ray's own resolution, where this Ray has it
        from ray._private.services import canonicalize_bootstrap_address

        resolved = canonicalize_bootstrap_address(address)  # type: ignore[arg-type]  # None is documented
    if not resolved or resolved in ("auto", "local"):
        return
    host, _, port = resolved.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise EvaluationError(f"{where}: the address must be host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_S).close()
    except OSError as exc:
        raise EvaluationError(
            f"cannot reach {where if address else f'the Ray cluster at {resolved}'} "
            f"({exc.strerror or exc}): is `ray start` running there?"
        ) from exc


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says an actor (its process, its node) is gone, rather than an error."""
    from ray import exceptions

    kinds = tuple(
        getattr(exceptions, name)
        for name in (
            "RayActorError",
            "WorkerCrashedError",
            "NodeDiedError",
            "ObjectLostError",
            "OwnerDiedError",
        )
        if hasattr(exceptions, name)
    )
    return isinstance(exc, kinds)
