"""``evopolicy view`` over a large store: first pages cold and warm, the server's memory.

Synthesizes a store of 10,000 recorded Runs and about 1,000,000 events (about 100 per Run:
3-11 Submissions of 4-16 Episodes each, five Benchmarks, four agents, a few Runs failed or
cut short; ``tests/support/runlogs.py`` writes them as the Host does) plus one Run of about
100,000 events (1,000 Submissions of 97 Episodes). ``--workdir DIR`` keeps the store there,
so a rerun reuses it; ``--quick``: 1,000 Runs (100,000 events) and a Run of 10,000 events.

Then it starts ``evopolicy view --store S --port 0 --cache C`` as a child process, with an
empty cache (cold: the Run index is built) and again with that cache (warm), ``--repeats``
times each, and times over HTTP, each from a new connection: the server's start to its
address printed, then to the first byte of ``GET /``; ``GET /`` again; a filtered, sorted
page deep in the list; the last page; the long Run's page and a 100-event Run's page (if the
Run page is served yet); the first message of ``/live``. It reads the server's RSS and peak
RSS (``/proc/<pid>/status``) after start, after those pages and after each of two rounds of
200 requests over random filters, sorts and pages: memory must stay flat.

Baselines measured in the same run: ``store.events.streams("run-")`` of the same store in a
fresh child (the one read of every Run stream a cold index needs), and a bare HTTP round trip
of the static ``/static/view.css`` on the same server. The store's log and blob pack are
hashed before and after browsing, with the listings of the store and of ``blobs/``.

Targets (printed, not asserted): first page <= 1 s warm, <= 3 s cold (from the address
printed to the first byte); RSS growth over 200 random pages <= 10 MiB; the long Run's page
raises the peak RSS by <= 64 MiB (it is not all read at once); the store byte-identical.

Run: uv run python tests/perf/bench_view.py [--quick] [--workdir DIR] [--repeats 3]
     [--profile]
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evopolicygym.records.location import open_store

CHECKOUT = Path(__file__).resolve().parents[2]  # where tests.support is found
# First, not just present: a distribution may install a top-level ``tests`` package into
# site-packages, which the editable install's path entry comes after.
if sys.path[:1] != [str(CHECKOUT)]:
    sys.path.insert(0, str(CHECKOUT))

RUNS, QUICK_RUNS = 10_000, 1_000
LONG_EVENTS, QUICK_LONG_EVENTS = 100_000, 10_000
LONG_RUN = "bench-long"
SHORT_RUN = "bench-000001"
EPISODES_PER_LONG_SUBMISSION = 97  # with its AgentMessages, start and publication: 100 events
APPEND_CHUNK = 5_000  # events per append: an append names every event id in one query
BUILD_FORMAT = 1  # bump when the synthesized store changes: a kept one is rebuilt
BENCHMARKS = ("toy-counter", "cartpole", "frozen-lake", "acrobot", "mountain-car")
AGENTS = (("reference", "reference", None), ("claude", "chat", "model-x"))
AGENTS += (("claude", "chat", "model-y"), ("codex", "codex", "model-z"))
REASONS = (("finished", 0.85), ("budget_exhausted", 0.07), ("agent_failed", 0.05))
REASONS += (("evaluation_failed", 0.03),)
CUT_SHORT = 0.01  # Runs whose stream stops mid-way (a Host that died): "running"
STATUSES = ("finished", "budget_exhausted", "agent_failed", "evaluation_failed", "running")
SORT_KEYS = ("created", "updated", "score", "benchmark", "agent", "status", "events")
SIDE_FILES = ("-wal", "-shm", "-journal")
PAGE_SIZE = 50  # the list's (view.index.PAGE_SIZE), to name its last page

WARM_TARGET_S = 1.0
COLD_TARGET_S = 3.0
GROWTH_TARGET_MIB = 10.0
LONG_HWM_TARGET_MIB = 64.0
RANDOM_REQUESTS = 200
HTTP_TIMEOUT_S = 300.0
START_TIMEOUT_S = 120.0
MiB = 1024 * 1024


# --------------------------------------------------------------------------- synthesis


def synth_run(i: int) -> Any:
    """Run ``i`` (a smaller store is a prefix of a larger one): about 100 events. Programs,
    the pool and the few traces come from small sets, so their blobs are shared across Runs."""
    from evopolicygym.transcript import AgentIdentity
    from tests.support.runlogs import Planned, SynthRun, policy_source

    rng = random.Random(i)
    submissions = []
    scores: list[tuple[float, int]] = []
    used = 0
    for sid in range(1, rng.randint(3, 11) + 1):
        indices = list(range(used, used + rng.randint(4, 16)))
        used += len(indices)
        failed = sid > 1 and rng.random() < 0.08
        rewards = None if failed else [float(rng.randrange(100)) for _ in indices]
        files = {"policy.py": policy_source(rng.randrange(21) / 10, rng.random() < 0.3)}
        submissions.append(Planned(files, indices, rewards, traced=rng.random() < 0.05))
        if rewards is not None:
            scores.append((sum(rewards) / len(rewards), sid))
    name, provider, model = AGENTS[i % len(AGENTS)]
    reason = rng.choices([r for r, _ in REASONS], weights=[w for _, w in REASONS])[0]
    return SynthRun(
        run_id=f"bench-{i:06d}",
        submissions=submissions,
        benchmark_id=BENCHMARKS[i % len(BENCHMARKS)],
        agent=AgentIdentity(name=name, provider=provider, model=model),
        candidates=[sid for _, sid in sorted(scores, reverse=True)[:2]] or [1],
        reason=reason,
        assessment_score=None if reason != "finished" else float(rng.randrange(1000)) / 10,
        chatter=rng.randint(1, 2),
        pool_size=used,
    )


def long_run(events: int) -> Any:
    """One Run of about ``events`` events: Submissions of 97 untraced Episodes each."""
    from tests.support.runlogs import Planned, SynthRun, policy_source

    rng = random.Random(events)
    submissions = []
    for sid in range(max(events // 100, 1)):
        first = sid * EPISODES_PER_LONG_SUBMISSION
        indices = list(range(first, first + EPISODES_PER_LONG_SUBMISSION))
        rewards = [float(rng.randrange(100)) for _ in indices]
        files = {"policy.py": policy_source(rng.randrange(21) / 10)}
        submissions.append(Planned(files, indices, rewards, traced=False))
    return SynthRun(
        run_id=LONG_RUN,
        submissions=submissions,
        pool_size=len(submissions) * EPISODES_PER_LONG_SUBMISSION,
        candidates=[1, 2] if len(submissions) > 1 else [1],
    )


class _Events:
    """The log as ``write_run`` sees it: its stream appended in chunks, or cut short."""

    def __init__(self, events: Any, keep: float | None) -> None:
        self._events = events
        self._keep = keep  # the share of the stream kept (None: all of it)

    def append(self, stream_id: str, batch: Sequence[Any], expected: int) -> list[int]:
        if self._keep is not None:
            batch = batch[: max(int(len(batch) * self._keep), 1)]
        positions: list[int] = []
        for first in range(0, len(batch), APPEND_CHUNK):
            chunk = batch[first : first + APPEND_CHUNK]
            positions += self._events.append(stream_id, chunk, expected + first)
        return positions


class _Writer:
    """A store for ``write_run``: its blobs, and its log through ``_Events``."""

    def __init__(self, store: Any, keep: float | None = None) -> None:
        self.blobs = store.blobs
        self.events = _Events(store.events, keep)


def build_store(path: Path, runs: int, long_events: int) -> dict[str, Any]:
    """Write the store at ``path``: ``runs`` Runs, then the long one. What was built."""
    from tests.support.runlogs import write_run

    started = time.perf_counter()
    with open_store(path, create=True) as store:
        for i in range(runs):
            keep = random.Random(-i).random() if random.Random(i).random() < CUT_SHORT else None
            write_run(_Writer(store, keep), synth_run(i), canary=False)  # type: ignore[arg-type]
        write_run(_Writer(store), long_run(long_events), canary=False)  # type: ignore[arg-type]
        events = store.events.head()
        long_version = next(
            info.version for info in store.events.streams(f"run-{LONG_RUN}") if info
        )
    return {
        "format": BUILD_FORMAT,
        "runs": runs + 1,
        "events": events,
        "long_events": long_version,
        "seconds": time.perf_counter() - started,
    }


def kept_store(workdir: Path, runs: int, long_events: int) -> tuple[Path, dict[str, Any]]:
    """The store for these sizes under ``workdir``: the one kept there, else a new one."""
    path = workdir / f"store-{runs}-{long_events}"
    marker = workdir / f"store-{runs}-{long_events}.json"
    if marker.exists() and (path / "events.db").exists():
        built = json.loads(marker.read_text())
        if built.get("format") == BUILD_FORMAT:
            built["reused"] = True
            return path, built
    shutil.rmtree(path, ignore_errors=True)
    built = build_store(path, runs, long_events)
    marker.write_text(json.dumps(built))
    built["reused"] = False
    return path, built


# --------------------------------------------------------------------------- the store's bytes


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(store: Path) -> dict[str, Any]:
    """The log's and the blob pack's hashes, the files of ``blobs/``, and the SQLite side
    files (``-wal``, ``-shm``) beside the log and the pack: a reader of a live WAL database
    may make them (``records.sqlite.read_only_connection``), so they are listed apart."""
    blobs = store / "blobs"
    files = [p for p in store.rglob("*") if p.is_file()]
    side = [p for p in files if p.name.endswith(SIDE_FILES)]
    return {
        "events.db": _sha256(store / "events.db"),
        "pack.db": _sha256(blobs / "pack.db") if (blobs / "pack.db").exists() else None,
        "blobs": sorted(
            (str(p.relative_to(blobs)), p.stat().st_size)
            for p in files
            if p.is_relative_to(blobs) and p not in side
        ),
        "side": sorted((str(p.relative_to(store)), p.stat().st_size) for p in side),
    }


# --------------------------------------------------------------------------- the server


def _evopolicy() -> list[str]:
    """The console script as a user runs it (its process is the server's Python)."""
    script = Path(sys.executable).parent / "evopolicy"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "evopolicygym.cli"]


class Server:
    """``evopolicy view`` in a child process; ``port`` once it printed its address."""

    def __init__(self, store: Path, cache: Path, log: Path) -> None:
        argv = [*_evopolicy(), "view", "--store", str(store), "--port", "0"]
        argv += ["--cache", str(cache)]
        self.log = log
        self.started = time.perf_counter()
        with log.open("ab") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        self.port = 0
        self.announced = 0.0
        self._wait_for_address()

    def _wait_for_address(self) -> None:
        assert self.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = self.started + START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):
            if not selector.select(timeout=max(deadline - time.perf_counter(), 0)):
                self.stop()
                raise SystemExit(f"the viewer printed no address in {START_TIMEOUT_S:.0f} s")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                self.stop()
                tail = self.log.read_text(errors="replace")[-2000:]
                raise SystemExit(f"the viewer exited ({self.proc.wait()}):\n{tail}")
            line += chunk
        self.announced = time.perf_counter()
        text = line.decode()
        self.port = int(text.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])

    def memory(self) -> tuple[float, float]:
        """RSS and peak RSS (VmHWM), MiB."""
        found = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024  # kB
        return found["VmRSS"], found["VmHWM"]

    def get(self, path: str) -> tuple[int, float, float, int]:
        """Status, seconds to the first byte and to the last, and body bytes of ``GET path``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        try:
            started = time.perf_counter()
            conn.request("GET", path, headers={"accept": "text/html"})
            response = conn.getresponse()
            first = time.perf_counter() - started
            body = response.read()
            return response.status, first, time.perf_counter() - started, len(body)
        finally:
            conn.close()

    def live_first(self) -> float:
        """Seconds from ``GET /live`` to its first message's data line."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        try:
            started = time.perf_counter()
            conn.request("GET", "/live", headers={"accept": "text/event-stream"})
            response = conn.getresponse()
            if response.status != 200:
                raise SystemExit(f"/live answered {response.status}")
            while not response.readline().startswith(b"data:"):
                pass
            return time.perf_counter() - started
        finally:
            conn.close()

    def stop(self) -> None:
        """SIGTERM to the server (this pid only), SIGKILL if it has not exited in 10 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def first_pages(server: Server, again: int = 5) -> dict[str, float]:
    """The first ``GET /`` (from the address printed, and from the start), then again."""
    asked = time.perf_counter()
    status, first, _, _ = server.get("/")
    if status != 200:
        raise SystemExit(f"GET / answered {status} (see {server.log})")
    since_start = asked - server.started + first
    return {
        "to_address": server.announced - server.started,
        "first": first,
        "since_start": since_start,
        "again": median_get(server, "/", again),
    }


def median_get(server: Server, path: str, n: int) -> float:
    """The median seconds to the first byte of ``n`` requests of ``path`` (which must answer)."""
    times = []
    for _ in range(n):
        status, first, _, _ = server.get(path)
        if status != 200:
            raise SystemExit(f"GET {path} answered {status} (see {server.log})")
        times.append(first)
    return statistics.median(times)


def random_path(rng: random.Random, pages: int) -> str:
    """A list page as a person might ask for it: 0-2 filters, a sort, an order, a page."""
    params: list[tuple[str, str]] = []
    choices = {
        "benchmark": BENCHMARKS,
        "agent": tuple(a for a, _, _ in AGENTS),
        "model": ("model-x", "model-y", "model-z"),
        "status": STATUSES,
    }
    for name in rng.sample(sorted(choices), rng.randint(0, 2)):
        params.append((name, rng.choice(choices[name])))
    params.append(("sort", rng.choice(SORT_KEYS)))
    params.append(("order", rng.choice(("asc", "desc"))))
    params.append(("page", str(rng.randint(1, pages))))
    return "/?" + "&".join(f"{k}={v}" for k, v in params)


def run_page(server: Server, run_id: str) -> dict[str, Any] | None:
    """The Run's page, first and second request, with the peak RSS it raised; None: 404."""
    _, hwm_before = server.memory()
    status, cold, cold_last, size = server.get(f"/runs/{run_id}")
    if status == 404:
        return None
    if status != 200:
        raise SystemExit(f"GET /runs/{run_id} answered {status} (see {server.log})")
    warm = median_get(server, f"/runs/{run_id}", 3)
    rss, hwm = server.memory()
    return {
        "cold": cold,
        "cold_last": cold_last,
        "warm": warm,
        "bytes": size,
        "hwm": hwm,
        "hwm_rise": hwm - hwm_before,
        "rss": rss,
    }


def browse(server: Server, runs: int, seed: int) -> dict[str, Any]:
    """Everything measured on one server, after its first pages: the page set, the Run
    pages, /live, the static baseline, and the memory over two rounds of random pages."""
    pages = -(-runs // PAGE_SIZE)
    found: dict[str, Any] = {"memory_start": server.memory()}
    found["deep"] = median_get(server, f"/?benchmark={BENCHMARKS[1]}&sort=score&page=50", 5)
    found["last"] = median_get(server, f"/?page={pages}", 5)
    found["live"] = statistics.median(server.live_first() for _ in range(3))
    found["static"] = median_get(server, "/static/view.css", 20)
    found["short_run"] = run_page(server, SHORT_RUN)
    found["long_run"] = run_page(server, LONG_RUN)
    found["memory_pages"] = server.memory()
    rng = random.Random(seed)
    rounds = []
    for _ in range(2):
        times = []
        for _ in range(RANDOM_REQUESTS):
            path = random_path(rng, pages + 5)
            status, first, _, _ = server.get(path)
            if status != 200:
                raise SystemExit(f"GET {path} answered {status} (see {server.log})")
            times.append(first)
        rounds.append({"median": statistics.median(times), "max": max(times)})
        rounds[-1]["memory"] = server.memory()
    found["rounds"] = rounds
    return found


# --------------------------------------------------------------------------- baselines


def streams_child(store: Path) -> dict[str, Any]:
    """In this (fresh) process: the seconds of ``streams("run-")``, the list's raw read."""
    with open_store(store, reader=True) as opened:
        started = time.perf_counter()
        infos = opened.events.streams("run-")
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "streams": len(infos), "events": sum(i.version for i in infos)}


def spawn_streams(store: Path) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(store)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"streams child failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def profile_cold(store: Path, cache: Path) -> str:
    """cProfile of what a cold first page waits for, in this process: the Run index built
    from an empty cache, then the first page read from it (the server does the same in a
    worker thread; the template's rendering is in the warm page's time)."""
    import cProfile
    import io
    import pstats

    from evopolicygym.view import RunIndex

    shutil.rmtree(cache, ignore_errors=True)
    with open_store(store, reader=True) as opened:
        index = RunIndex(opened, cache)
        profiler = cProfile.Profile()
        profiler.enable()
        index.refresh()
        index.page({})
        profiler.disable()
        index.close()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
    stats.print_stats(25)
    return text.getvalue().replace(str(CHECKOUT) + os.sep, "")


# --------------------------------------------------------------------------- measuring


def measure(store: Path, workdir: Path, runs: int, repeats: int, seed: int) -> dict[str, Any]:
    """Pairs of servers, cold (an empty cache) then warm (the cache the cold one built);
    the first cold server is also browsed."""
    log = workdir / "view.log"
    cache = workdir / "view-cache"
    colds: list[dict[str, Any]] = []
    warms: list[dict[str, Any]] = []
    browsed: dict[str, Any] = {}
    for repeat in range(repeats):
        for turn in (colds, warms):
            if turn is colds:
                shutil.rmtree(cache, ignore_errors=True)
            server = Server(store, cache, log)
            try:
                at_start = server.memory()
                pages = first_pages(server)
                pages["memory_start"], pages["memory_first"] = at_start, server.memory()
                turn.append(pages)
                if turn is colds and not browsed:
                    browsed = browse(server, runs, seed)
            finally:
                server.stop()
        print(
            f"repeat {repeat + 1}/{repeats}: first page cold {colds[-1]['first']:.2f} s, "
            f"warm {warms[-1]['first']:.3f} s (from the address printed)"
        )
    return {"cold": colds, "warm": warms, "browsed": browsed}


# --------------------------------------------------------------------------- the table


def _spread(values: list[float], unit: str = "s", digits: int = 2) -> str:
    """The median, and the range when there are several."""
    middle = f"{statistics.median(values):.{digits}f} {unit}"
    if len(values) < 2:
        return middle
    return f"{middle} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def timing_rows(found: dict[str, Any], base: dict[str, float]) -> list[tuple[str, ...]]:
    colds, warms, browsed = found["cold"], found["warm"], found["browsed"]
    static, streams = base["static"], base["streams"]
    cold = statistics.median(c["first"] for c in colds)
    warm = statistics.median(w["first"] for w in warms)

    def vs(seconds: float) -> str:
        return f"{seconds / static:,.0f}x static"

    rows: list[tuple[str, ...]] = [
        ("baseline: streams('run-') in a fresh child", _spread([streams]), "", ""),
        ("baseline: GET /static/view.css (median of 20)", f"{static * 1000:.1f} ms", "", ""),
        (
            "server start -> address printed, cold",
            _spread([c["to_address"] for c in colds]),
            "",
            "",
        ),
        (
            "first page, cold (address -> first byte)",
            _spread([c["first"] for c in colds]),
            f"<= {COLD_TARGET_S:g} s",
            _verdict(cold <= COLD_TARGET_S),
        ),
        ("  the same / streams baseline", f"{cold / streams:.1f}x", "", ""),
        (
            "server start -> first byte of GET /, cold",
            _spread([c["since_start"] for c in colds]),
            "",
            "",
        ),
        (
            "first page, warm (address -> first byte)",
            _spread([w["first"] for w in warms], "s", 3),
            f"<= {WARM_TARGET_S:g} s",
            _verdict(warm <= WARM_TARGET_S),
        ),
        ("  the same / static baseline", vs(warm), "", ""),
        (
            "server start -> first byte of GET /, warm",
            _spread([w["since_start"] for w in warms]),
            "",
            "",
        ),
        ("GET / again (median of 5)", _spread([w["again"] for w in warms], "s", 3), "", ""),
        (
            f"GET /?benchmark={BENCHMARKS[1]}&sort=score&page=50",
            f"{browsed['deep']:.3f} s",
            "",
            vs(browsed["deep"]),
        ),
        ("GET the last page", f"{browsed['last']:.3f} s", "", vs(browsed["last"])),
        ("/live: first message", f"{browsed['live']:.3f} s", "", ""),
    ]
    for label, run_id, key in (
        ("100-event", SHORT_RUN, "short_run"),
        ("long", LONG_RUN, "long_run"),
    ):
        page = browsed[key]
        if page is None:
            rows.append((f"GET /runs/{run_id} ({label} Run)", "not served yet (404)", "", ""))
            continue
        rows.append(
            (
                f"GET /runs/{run_id} ({label} Run), first / again",
                f"{page['cold']:.3f} / {page['warm']:.3f} s",
                "",
                f"{page['bytes'] / 1024:,.0f} KiB",
            )
        )
    long_page, short_page = browsed["long_run"], browsed["short_run"]
    if long_page is not None:
        rise = long_page["hwm_rise"]
        rows.append(
            (
                "  the long Run's page: peak RSS rise",
                f"{rise:+.1f} MiB",
                f"<= {LONG_HWM_TARGET_MIB:g} MiB",
                _verdict(rise <= LONG_HWM_TARGET_MIB),
            )
        )
        if short_page is not None:
            ratio = long_page["cold"] / short_page["cold"]
            rows.append(("  long / 100-event Run page, first", f"{ratio:.1f}x", "", ""))
    return rows


def memory_rows(found: dict[str, Any]) -> list[tuple[str, ...]]:
    cold, browsed = found["cold"][0], found["browsed"]
    rows: list[tuple[str, ...]] = [
        ("RSS after start (cold)", f"{cold['memory_start'][0]:.1f} MiB", "", ""),
        (
            "RSS after the first page (cold)",
            f"{cold['memory_first'][0]:.1f} MiB",
            "",
            f"peak {cold['memory_first'][1]:.1f}",
        ),
        (
            "RSS after the page set",
            f"{browsed['memory_pages'][0]:.1f} MiB",
            "",
            f"peak {browsed['memory_pages'][1]:.1f}",
        ),
    ]
    before = browsed["memory_pages"][0]
    growths = []
    for n, round_ in enumerate(browsed["rounds"], start=1):
        rss, hwm = round_["memory"]
        growths.append(rss - before)
        rows.append(
            (
                f"RSS after {n * RANDOM_REQUESTS} random pages (median {round_['median']:.3f} s, "
                f"max {round_['max']:.3f} s)",
                f"{rss:.1f} MiB ({rss - before:+.1f})",
                f"<= +{GROWTH_TARGET_MIB:g} MiB",
                _verdict(rss - before <= GROWTH_TARGET_MIB) + f", peak {hwm:.1f}",
            )
        )
        before = rss
    warm = found["warm"][0]
    rows.append(
        (
            "RSS after start / first page (warm)",
            f"{warm['memory_start'][0]:.1f} / {warm['memory_first'][0]:.1f} MiB",
            "",
            f"peak {warm['memory_first'][1]:.1f}",
        )
    )
    return rows


def store_rows(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, ...]]:
    rows = []
    for key, label in (("events.db", "events.db sha256"), ("pack.db", "blobs/pack.db sha256")):
        same = before[key] == after[key]
        rows.append((label, f"{str(after[key])[:16]}...", "unchanged", _verdict(same)))
    same = before["blobs"] == after["blobs"]
    rows.append(
        ("blobs/ files, side files apart", f"{len(after['blobs'])}", "unchanged", _verdict(same))
    )
    new = sorted(set(after["side"]) - set(before["side"]))
    gone = sorted(set(before["side"]) - set(after["side"]))
    shown = ", ".join(f"{name} ({size:,} B)" for name, size in new)
    if not new:
        present = ", ".join(name for name, _ in after["side"])
        shown = f"none (present before: {present})" if present else "none"
    rows.append(("SQLite side files made by the viewer", shown, "", ""))
    if gone:
        rows.append(("SQLite side files gone", ", ".join(n for n, _ in gone), "", ""))
    return rows


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    print(f"{'figure':<{widths[0]}}  {'value':<{widths[1]}}  {'target':<{widths[2]}}  met?")
    for figure, value, target, verdict in rows:
        print(f"{figure:<{widths[0]}}  {value:<{widths[1]}}  {target:<{widths[2]}}  {verdict}")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 Runs, a long Run of 10,000")
    parser.add_argument("--runs", type=int, default=None, help="Runs in the store")
    parser.add_argument("--long-events", type=int, default=None, help="events of the long Run")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the store is built and kept for reruns"
    )
    parser.add_argument("--repeats", type=int, default=3, help="cold and warm servers each")
    parser.add_argument("--seed", type=int, default=0, help="of the random pages")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile what the cold first page waits for"
    )
    parser.add_argument("--child", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(streams_child(Path(args.child))))
        return

    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    long_events = args.long_events or (QUICK_LONG_EVENTS if args.quick else LONG_EVENTS)
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        print(
            f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        store, built = kept_store(workdir, runs, long_events)
        size = (store / "events.db").stat().st_size / MiB
        how = "reused" if built["reused"] else "synthesized"
        print(
            f"{how}: {built['runs']:,} Runs, {built['events']:,} events (the long Run "
            f"{built['long_events']:,}), events.db {size:,.0f} MiB, built in "
            f"{built['seconds']:.0f} s"
        )
        before = fingerprint(store)
        children = [spawn_streams(store) for _ in range(3)]
        found = measure(store, workdir, built["runs"], max(args.repeats, 1), args.seed)
        after = fingerprint(store)
        base = {
            "streams": statistics.median(c["seconds"] for c in children),
            "static": found["browsed"]["static"],
        }
        print()
        print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeats} servers each")
        print_table(timing_rows(found, base) + memory_rows(found) + store_rows(before, after))
        if args.profile:
            print()
            print("cProfile: the Run index built from an empty cache, then the first page:")
            print(profile_cold(store, workdir / "profile-cache"))


if __name__ == "__main__":
    main()
