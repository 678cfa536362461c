"""The evaluation engine end to end: real policy processes, real Gymnasium, hostile policies."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicygym.evaluation import EvaluationConfig, EvaluationError, Evaluator, ResourceLimits
from evopolicygym.program import Program, ProgramError
from evopolicygym_classic import cartpole
from tests.support.policies import GOOD, program
from tests.support.toybench import CLOSED, CounterBenchmark


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    # One Evaluator (one fork server, one runner pool) for the module: hostile
    # policies must leave it usable for the next test.
    with Evaluator() as ev:
        yield ev


def run(evaluator: Evaluator, source: str, episodes: int = 2, timeout: float = 5.0, **limits: int):
    config = EvaluationConfig(
        episodes=episodes, jobs=1, episode_timeout=timeout, limits=ResourceLimits(**limits)
    )
    return evaluator.evaluate(program(source), CounterBenchmark(), config)


def test_good_policy_scores_and_reports(evaluator: Evaluator) -> None:
    result = run(evaluator, GOOD, episodes=3)
    assert [e.status for e in result.episodes] == ["ok"] * 3
    assert [e.index for e in result.episodes] == [0, 1, 2]
    assert all(e.steps >= 3 for e in result.episodes)
    assert result.feedback.score == pytest.approx(sum(e.total_reward for e in result.episodes) / 3)
    assert result.program_digest.startswith("sha256:")
    assert result.containment in ("namespaces", "process-group")


def test_close_is_called_on_every_path(evaluator: Evaluator) -> None:
    CLOSED.clear()
    run(evaluator, GOOD, episodes=2)
    run(evaluator, "raise RuntimeError('at import')", episodes=2)
    run(
        evaluator,
        "class P:\n    def act(self, o):\n        return 7\ndef make_policy(c):\n    return P()",
        episodes=1,
    )
    assert len(CLOSED) == 5


@pytest.mark.parametrize(
    ("name", "source", "status", "needle"),
    [
        (
            "exception at import",
            "raise RuntimeError('boom at import')",
            "exception",
            "boom at import",
        ),
        (
            "exception in act",
            "class P:\n    def act(self, o):\n        raise ValueError('bad act')\n"
            "def make_policy(c):\n    return P()",
            "exception",
            "bad act",
        ),
        ("no make_policy", "x = 1", "protocol_error", "make_policy"),
        ("no act", "def make_policy(c):\n    return object()", "protocol_error", "act"),
        (
            "infinite loop",
            "class P:\n    def act(self, o):\n        while True:\n            pass\n"
            "def make_policy(c):\n    return P()",
            "timeout",
            "deadline",
        ),
        (
            "sleep at start-up",
            "import time\ntime.sleep(60)\ndef make_policy(c):\n    return None",
            "timeout",
            "deadline",
        ),
        (
            "os._exit",
            "import os\nclass P:\n    def act(self, o):\n        os._exit(3)\n"
            "def make_policy(c):\n    return P()",
            "protocol_error",
            "code 3",
        ),
        (
            "non-value action",
            "class P:\n    def act(self, o):\n        return object()\n"
            "def make_policy(c):\n    return P()",
            "protocol_error",
            "not a PolicyValue",
        ),
        (
            "action outside the space",
            "class P:\n    def act(self, o):\n        return 7\n"
            "def make_policy(c):\n    return P()",
            "invalid_action",
            "0 or 1",
        ),
        (
            "oversized action frame",
            "class P:\n    def act(self, o):\n        return b'x' * (5 * 1024 * 1024)\n"
            "def make_policy(c):\n    return P()",
            "resource_limit",
            "exceeds",
        ),
        (
            "memory bomb",
            "class P:\n    def act(self, o):\n        return len(bytearray(8 * 1024 ** 3))\n"
            "def make_policy(c):\n    return P()",
            "resource_limit",
            "MemoryError",
        ),
        (
            "gradual memory growth",
            "class P:\n    def act(self, o):\n        hog = []\n        while True:\n"
            "            hog.append(bytearray(1 << 20))\n"
            "def make_policy(c):\n    return P()",
            "resource_limit",
            "",
        ),
        (
            "segmentation fault",
            "import ctypes\nclass P:\n    def act(self, o):\n        return ctypes.string_at(0)\n"
            "def make_policy(c):\n    return P()",
            "exception",
            "SIGSEGV",
        ),
    ],
)
@pytest.mark.timeout(60)  # a hang guard, not a speed claim: each case ends within its deadline
def test_hostile_policies_are_classified(
    evaluator: Evaluator, name: str, source: str, status: str, needle: str
) -> None:
    result = run(evaluator, source, episodes=1, timeout=1.5, memory_mb=256)
    episode = result.episodes[0]
    assert episode.status == status, (name, episode)
    assert needle in (episode.failure or ""), (name, episode.failure)
    # The Host is unaffected: the same Evaluator still evaluates a good policy.
    assert run(evaluator, GOOD, episodes=1).episodes[0].status == "ok"


def _processes_in(namespace: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_fork_bomb_is_contained_and_nothing_is_left_behind(evaluator: Evaluator) -> None:
    source = """
    import os, sys, time
    print("ns", os.readlink("/proc/self/ns/pid"), file=sys.stderr, flush=True)
    class P:
        def act(self, o):
            for _ in range(200):
                try:
                    if os.fork() == 0:
                        os.setsid()  # try to escape the process group
                        time.sleep(600)
                        os._exit(0)
                except OSError:
                    break
            return 1
    def make_policy(c):
        return P()
    """
    if evaluator.fork_server.containment != "namespaces":
        pytest.skip("process-group containment cannot reap children that call setsid()")
    result = run(evaluator, source, episodes=2, timeout=5.0, max_processes=32)
    assert [e.status for e in result.episodes] == ["ok", "ok"]
    namespaces = {m for r in result.records for m in re.findall(r"ns (pid:\[\d+\])", r.stderr_tail)}
    assert len(namespaces) == 2  # a fresh PID namespace per Episode
    own = os.readlink("/proc/self/ns/pid")
    assert own not in namespaces
    deadline = time.monotonic() + 5
    while any(_processes_in(ns) for ns in namespaces) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_processes_in(ns) for ns in namespaces)


def test_print_flood_is_bounded_and_does_not_block(evaluator: Evaluator) -> None:
    source = """
    import sys
    class P:
        def act(self, o):
            sys.stdout.write("x" * 100_000 + "\\n")
            print("tail-marker", file=sys.stderr)
            return 1 if o[0] < o[1] else 0
    def make_policy(c):
        return P()
    """
    config = EvaluationConfig(episodes=1, jobs=1, output_tail_bytes=4096)
    result = evaluator.evaluate(program(source), CounterBenchmark(), config)
    record = result.records[0]
    assert record.status == "ok"
    marker, _, tail = record.stderr_tail.partition("\n")
    cut = re.fullmatch(r"\[… ([\d,]+) earlier bytes of output cut\]", marker)
    assert cut is not None, marker  # a cut tail says so, and by how much
    assert len(tail.encode()) == 4096 and tail.endswith("tail-marker\n")
    printed = result.episodes[0].steps * len("x" * 100_000 + "\n" + "tail-marker\n")
    assert int(cut.group(1).replace(",", "")) + 4096 == printed


def test_no_state_crosses_episodes(evaluator: Evaluator) -> None:
    # Module state, files in the working directory and files beside the program
    # must all be fresh in every Episode.
    source = """
    import os
    COUNT = [0]
    HERE = os.path.dirname(os.path.abspath(__file__))
    class P:
        def __init__(self, seen):
            self.seen = seen
        def act(self, o):
            if self.seen:
                return 9  # invalid: reports that state leaked
            return 1 if o[0] < o[1] else 0
    def make_policy(c):
        seen = COUNT[0] > 0 or os.path.exists("note") or os.path.exists(os.path.join(HERE, "note"))
        COUNT[0] += 1
        open("note", "w").write("x")
        try:
            open(os.path.join(HERE, "note"), "w").write("x")
        except OSError:
            pass
        return P(seen)
    """
    result = run(evaluator, source, episodes=3)
    if result.containment == "namespaces":
        assert [e.status for e in result.episodes] == ["ok"] * 3, result.episodes
    else:
        assert result.episodes[0].status == "ok"


def test_program_directory_is_read_only(evaluator: Evaluator) -> None:
    source = """
    import os
    HERE = os.path.dirname(os.path.abspath(__file__))
    def make_policy(c):
        try:
            open(os.path.join(HERE, "policy.py"), "a").write("# tampered")
        except OSError as exc:
            raise RuntimeError("read-only: " + exc.strerror)
        return None
    """
    result = run(evaluator, source, episodes=1)
    if result.containment != "namespaces":
        pytest.skip("needs mount namespaces")
    assert result.episodes[0].status == "exception"
    assert "read-only" in (result.episodes[0].failure or "")


def test_policy_randomness_is_seeded_per_episode(evaluator: Evaluator) -> None:
    source = """
    import random
    class P:
        def act(self, o):
            return random.randrange(2)
    def make_policy(c):
        return P()
    """
    first = run(evaluator, source, episodes=4)
    second = run(evaluator, source, episodes=4)
    assert [e.total_reward for e in first.episodes] == [e.total_reward for e in second.episodes]
    assert len({(e.steps, e.total_reward) for e in first.episodes}) > 1


@pytest.mark.parametrize("fail_on", ["make", "step", "score"])
def test_trusted_faults_abort_the_evaluation(evaluator: Evaluator, fail_on: str) -> None:
    with pytest.raises(EvaluationError):
        evaluator.evaluate(
            program(GOOD), CounterBenchmark(fail_on=fail_on), EvaluationConfig(episodes=2, jobs=1)
        )
    assert run(evaluator, GOOD, episodes=1).episodes[0].status == "ok"


def test_trusted_fault_in_a_runner_process(evaluator: Evaluator) -> None:
    with pytest.raises(EvaluationError, match="physics exploded"):
        evaluator.evaluate(
            program(GOOD), CounterBenchmark(fail_on="step"), EvaluationConfig(episodes=4, jobs=2)
        )


def test_program_without_policy_is_refused(evaluator: Evaluator) -> None:
    with pytest.raises(ProgramError, match=r"policy\.py"):
        evaluator.evaluate(Program.from_files({"helper.py": "x = 1"}), CounterBenchmark())


def test_unknown_split_is_refused(evaluator: Evaluator) -> None:
    with pytest.raises(ValueError, match="unknown split"):
        evaluator.evaluate(program(GOOD), CounterBenchmark(), EvaluationConfig(split="test"))


def test_helper_modules_beside_policy_are_importable(evaluator: Evaluator) -> None:
    source = """
    from rules import choose
    class P:
        def act(self, o):
            return choose(o)
    def make_policy(c):
        return P()
    """
    rules = "def choose(o):\n    return 1 if o[0] < o[1] else 0\n"
    config = EvaluationConfig(episodes=2, jobs=1)
    result = evaluator.evaluate(program(source, **{"rules.py": rules}), CounterBenchmark(), config)
    assert [e.status for e in result.episodes] == ["ok", "ok"]


@pytest.mark.slow
def test_jobs_one_and_two_give_identical_results(evaluator: Evaluator) -> None:
    baseline = Program.from_directory(Path(cartpole().baseline_dir()))
    noisy = program(
        """
        import random
        class P:
            def act(self, o):
                return 1 if o[3] + random.gauss(0, 0.3) > 0 else 0
        def make_policy(c):
            return P()
        """
    )
    for prog in (baseline, noisy):
        one = evaluator.evaluate(prog, cartpole(), EvaluationConfig(episodes=6, jobs=1, seed=3))
        two = evaluator.evaluate(prog, cartpole(), EvaluationConfig(episodes=6, jobs=2, seed=3))
        assert two.jobs == 2
        assert one.feedback.score == two.feedback.score
        assert one.feedback.content == two.feedback.content
        assert [(e.index, e.status, e.total_reward, e.steps) for e in one.episodes] == [
            (e.index, e.status, e.total_reward, e.steps) for e in two.episodes
        ]


def test_policy_sees_only_its_program_and_scratch(evaluator: Evaluator, tmp_path: Path) -> None:
    # A Host-private file (think: the event store) must be out of reach, as must the
    # network and every other process.
    secret = tmp_path / "events.db"
    secret.write_text("validation seed 123456789")
    source = f"""
    import os, socket
    def probe():
        found = []
        try:
            open({str(secret)!r}).read()
            found.append("read the Host file")
        except OSError:
            pass
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=0.5)
            found.append("network")
        except OSError as exc:
            if exc.errno not in (101, 99):  # ENETUNREACH, EADDRNOTAVAIL
                found.append("network reachable: " + str(exc))
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        if pids != ["1"]:
            found.append("other processes: " + ",".join(pids[:5]))
        if os.geteuid() == 0:
            found.append("runs as root")
        try:
            open("/program/extra.py", "w")
            found.append("wrote to its program")
        except OSError:
            pass
        open("note.txt", "w").write("scratch is writable")
        return found
    def make_policy(c):
        found = probe()
        if found:
            raise RuntimeError("; ".join(found))
        return None
    """
    result = run(evaluator, source, episodes=1)
    if result.containment != "namespaces":
        pytest.skip("needs namespaces")
    # make_policy returned None (no act): a protocol error, reached only if every probe passed.
    assert result.episodes[0].status == "protocol_error", result.episodes[0].failure


@pytest.mark.parametrize(
    ("source", "status"),
    [
        (GOOD, "ok"),
        ("raise RuntimeError('at import')", "exception"),
        (
            "class P:\n    def act(self, o):\n        while True:\n            pass\n"
            "def make_policy(c):\n    return P()",
            "timeout",
        ),
        (
            "class P:\n    def act(self, o):\n        return len(bytearray(8 * 1024 ** 3))\n"
            "def make_policy(c):\n    return P()",
            "resource_limit",
        ),
    ],
)
def test_process_group_fallback(monkeypatch: pytest.MonkeyPatch, source: str, status: str) -> None:
    # Where namespaces are unavailable (no privileges), the weaker level must still classify.
    monkeypatch.setenv("EVOPOLICY_CONTAINMENT", "process-group")
    with Evaluator() as fallback:
        config = EvaluationConfig(
            episodes=1, jobs=1, episode_timeout=1.5, limits=ResourceLimits(memory_mb=256)
        )
        result = fallback.evaluate(program(source), CounterBenchmark(), config)
    assert result.containment == "process-group"
    assert result.episodes[0].status == status, result.episodes[0]


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry))
    return children


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_policy_process_outlives_its_evaluation(evaluator: Evaluator, jobs: int) -> None:
    evaluator.evaluate(program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=4, jobs=jobs))
    server = evaluator.fork_server.server_pid
    deadline = time.monotonic() + 3
    while _children_of(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _children_of(server) == []


HOST_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from tests.support.toybench import CounterBenchmark
from evopolicygym.evaluation import EvaluationConfig, evaluate
from evopolicygym.program import Program
busy = (
    "class P:\\n    def act(self, o):\\n        while True:\\n            pass\\n"
    "def make_policy(c):\\n    return P()"
)
config = EvaluationConfig(episodes=4, jobs=2, episode_timeout=60)
print("started", flush=True)
evaluate(Program.from_files({{"policy.py": busy}}), CounterBenchmark(), config)
"""


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_sigkilled_host_leaves_no_process_behind() -> None:
    import tempfile

    root = str(Path(__file__).resolve().parents[1])  # the checkout, above tests.support
    # The killed Host cannot remove its fork server's directory: keep it in a directory of the
    # test's, short (a pytest-xdist worker's tmp_path makes the server's socket path too long).
    with tempfile.TemporaryDirectory(prefix="k") as short:
        _kill_host_then_count(root, {**os.environ, "TMPDIR": short})


def _kill_host_then_count(root: str, env: dict[str, str]) -> None:
    import signal
    import subprocess
    import sys

    host = subprocess.Popen(
        [sys.executable, "-c", HOST_SCRIPT.format(root=root)], stdout=subprocess.PIPE, env=env
    )
    assert host.stdout is not None
    assert host.stdout.readline().strip() == b"started"
    # Wait until the fork server, two runners and busy policies exist.
    deadline = time.monotonic() + 20
    while len(_descendants(host.pid)) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    spawned = _descendants(host.pid)
    assert len(spawned) >= 5, spawned
    host.send_signal(signal.SIGKILL)
    host.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in spawned if _alive(p)]


# --- attacks on the Host side of the channel -----------------------------------------------

DRIP = """
import os, struct, time
class P:
    def act(self, o):
        os.write(3, struct.pack("<IB", 1 << 20, ord("A")))  # announce a 1 MiB action...
        while True:  # ...and send it one byte at a time
            os.write(3, b"x")
            time.sleep(0.03)
def make_policy(c):
    return P()
"""

NOT_READING = """
import os, struct, threading, time
def flood():
    frame = (struct.pack("<IB", 1, ord("A")) + bytes([0])) * 100
    while True:
        os.write(3, frame)
class P:
    def act(self, o):
        threading.Thread(target=flood, daemon=True).start()
        time.sleep(600)  # answers forever but never reads: the Host's sends must not block forever
def make_policy(c):
    return P()
"""


@pytest.mark.parametrize(("name", "source"), [("drip", DRIP), ("not reading", NOT_READING)])
@pytest.mark.timeout(30)  # a hang guard: without the deadline on every wait these never end
def test_a_policy_cannot_stall_the_host_past_the_deadline(
    evaluator: Evaluator, name: str, source: str
) -> None:
    config = EvaluationConfig(episodes=1, jobs=1, episode_timeout=1.0)
    result = evaluator.evaluate(program(source), CounterBenchmark(horizon=10_000_000), config)
    assert result.episodes[0].status == "timeout", (name, result.episodes[0])


@pytest.mark.parametrize(
    "forged",
    [
        "struct.pack('<IB', 1, ord('F')) + b'\\x05'",
        "struct.pack('<IB', 100001, ord('F')) + b'\\x91' * 100000 + b'\\xc0'",
        "struct.pack('<IB', 3, ord('F')) + b'\\x92\\xa0\\x01'",
    ],
)
def test_forged_failure_reports_are_protocol_errors(evaluator: Evaluator, forged: str) -> None:
    source = f"""
import os, struct, time
class P:
    def act(self, o):
        os.write(3, {forged})
        time.sleep(5)
def make_policy(c):
    return P()
"""
    result = run(evaluator, source, episodes=1)
    assert result.episodes[0].status == "protocol_error", result.episodes[0]


@pytest.mark.timeout(20)  # a hang guard: waiting again for an already collected exit took 10 s each
def test_crashes_are_classified_without_waiting(evaluator: Evaluator) -> None:
    source = (
        "import os\nclass P:\n    def act(self, o):\n        os._exit(3)\n"
        "def make_policy(c):\n    return P()"
    )
    result = run(evaluator, source, episodes=3)
    assert [e.status for e in result.episodes] == ["protocol_error"] * 3


def test_a_failure_report_is_bounded(evaluator: Evaluator) -> None:
    """What a policy can make the Host record is bounded, and says where it was cut."""
    source = (
        "class P:\n    def act(self, o):\n        raise ValueError('x' * 3_000_000 + ' the end')\n"
        "def make_policy(c):\n    return P()"
    )
    result = run(evaluator, source, episodes=1)
    assert result.episodes[0].status == "exception"
    failure = result.episodes[0].failure or ""
    marker, _, tail = failure.partition("\n")
    assert re.fullmatch(r"\[… [\d,]+ earlier characters cut\]", marker), marker
    assert len(tail) == 4000 and tail.endswith("the end")


def test_a_chatty_start_up_does_not_time_out(evaluator: Evaluator) -> None:
    source = "import sys\nsys.stdout.write('y' * 8_000_000)\n" + GOOD
    result = run(evaluator, source, episodes=1, timeout=5.0)
    assert result.episodes[0].status == "ok", result.episodes[0]


# --- what a jailed policy can see ----------------------------------------------------------


def test_host_environment_is_not_in_policy_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST_API_TOKEN", "sk-live-canary-7f3a9")
    source = """
import re
def scan():
    found = []
    for line in open("/proc/self/maps"):
        if "[stack]" in line:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            import ctypes
            if b"sk-live-canary" in ctypes.string_at(start, end - start):
                found.append("stack")
    import os
    if any("canary" in v for v in os.environ.values()):
        found.append("environ")
    return found
def make_policy(c):
    found = scan()
    if found:
        raise RuntimeError("Host environment visible in " + ", ".join(found))
    return None
"""
    with Evaluator() as fresh:
        result = fresh.evaluate(
            program(source), CounterBenchmark(), EvaluationConfig(episodes=1, jobs=1)
        )
    assert result.episodes[0].status == "protocol_error", result.episodes[0].failure


def test_sysv_shared_memory_does_not_cross_episodes(evaluator: Evaluator) -> None:
    source = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def make_policy(c):
    shmid = libc.shmget(0x5EED, 4096, 0o1000 | 0o666)  # IPC_CREAT
    if shmid < 0:
        raise RuntimeError("shmget failed")
    addr = libc.shmat(shmid, None, 0)
    previous = ctypes.string_at(addr, 5)
    ctypes.memmove(addr, b"seen!", 5)
    if previous == b"seen!":
        raise RuntimeError("state from an earlier Episode")
    return None
"""
    result = run(evaluator, source, episodes=3)
    if result.containment != "namespaces":
        pytest.skip("needs namespaces")
    assert [e.status for e in result.episodes] == ["protocol_error"] * 3, [
        e.failure for e in result.episodes
    ]


def test_tempfile_works_in_the_jail(evaluator: Evaluator) -> None:
    source = """
import tempfile
def make_policy(c):
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(b"ok")
    tempfile.mkdtemp()
    return None
"""
    result = run(evaluator, source, episodes=1)
    assert result.episodes[0].status == "protocol_error", result.episodes[0].failure


def test_scratch_space_is_capped(evaluator: Evaluator) -> None:
    source = """
def make_policy(c):
    with open("big", "wb") as handle:
        for _ in range(64):
            handle.write(b"z" * (1 << 20))
    return None
"""
    result = run(evaluator, source, episodes=1, scratch_mb=16)
    if result.containment != "namespaces":
        pytest.skip("needs namespaces")
    assert result.episodes[0].status == "resource_limit", result.episodes[0]


def test_a_policy_that_patches_exit_is_still_stopped(evaluator: Evaluator) -> None:
    source = (
        """
import os, time
os._exit = lambda code: time.sleep(3600)
"""
        + GOOD
    )
    evaluator.evaluate(program(source), CounterBenchmark(), EvaluationConfig(episodes=2, jobs=1))
    server = evaluator.fork_server.server_pid
    deadline = time.monotonic() + 3
    while _children_of(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _children_of(server) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"episode_timeout": float("inf")},
        {"episode_timeout": 0},
        {"jobs": 0},
        {"episodes": -1},
        {"trace_steps": -1},
    ],
)
def test_bad_configs_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        EvaluationConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"memory_mb": -5}, {"max_file_mb": 0}, {"max_processes": 0}, {"cpu_seconds": 0}]
)
def test_bad_limits_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ResourceLimits(**kwargs)


def test_abandoned_host_directories_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork server's directory is in its Host's private one; a SIGKILLed Host leaves
    that behind, and the next Host removes it (a live process's stays)."""
    import tempfile

    from evopolicygym import hostdirs
    from evopolicygym.evaluation.forkserver import ForkServer

    short = Path(tempfile.mkdtemp(prefix="t"))  # the socket path must stay short
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short))
        monkeypatch.setattr(hostdirs, "_bases", {})  # as a new Host process
        dead = short / "evopolicy-h4194305-abandoned"  # above the largest possible pid_max
        alive = short / f"evopolicy-h{os.getpid()}-in-use"
        other = short / "evopolicy-hnotapid"
        for directory in (dead, alive, other):
            (directory / "fx" / "work").mkdir(parents=True)
        with ForkServer() as server:
            assert Path(server.address).parent.parent == Path(hostdirs.host_base())
            assert Path(hostdirs.host_base()).parent == short
        assert not dead.exists()
        assert alive.exists() and other.exists()
    finally:
        hostdirs.remove_tree(short)


def test_an_evaluator_first_used_from_a_thread_that_exits_keeps_working() -> None:
    """The fork server and runners die with their parent *thread* (PR_SET_PDEATHSIG is per
    thread); a session handler thread that evaluates and exits must not take them along."""
    import threading

    results = []
    with Evaluator() as evaluator:

        def evaluate_once() -> None:
            results.append(
                evaluator.evaluate(
                    program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=2, jobs=2)
                )
            )

        for _ in range(2):  # the second thread finds what the first one started
            worker = threading.Thread(target=evaluate_once)
            worker.start()
            worker.join()
        results.append(
            evaluator.evaluate(
                program(GOOD), CounterBenchmark(), EvaluationConfig(episodes=2, jobs=2)
            )
        )
    assert len(results) == 3
    assert all([e.status for e in r.episodes] == ["ok", "ok"] for r in results)


FORK_SERVER_HUNT = """
import os, socket, stat, sys

def make_policy(context):
    found = closed = 0
    for root, _dirs, files in os.walk({temp!r}):
        for name in files:
            path = os.path.join(root, name)
            try:
                if not stat.S_ISSOCK(os.lstat(path).st_mode):
                    continue
                found += 1
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                    sock.settimeout(2)
                    sock.connect(path)
                    sock.send(bytes([0x81, 0xA2]) + b"op" + bytes([0xA8]) + b"shutdown")
                    if sock.recv(64) == b"":
                        closed += 1
            except OSError:
                closed += 1
    print(f"found {{found}} closed {{closed}}", file=sys.stderr, flush=True)
    return Policy()

class Policy:
    def act(self, obs):
        return 0
"""


def test_a_policy_that_reaches_the_fork_server_socket_is_turned_away(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without namespaces a policy can find the fork server's socket (it is the Host's
    user); the server checks SO_PEERCRED and serves only the Host and its runners, so a
    policy's `shutdown` is dropped and the next Episodes are forked as usual."""
    import shutil
    import tempfile

    from evopolicygym import hostdirs

    monkeypatch.setenv("EVOPOLICY_CONTAINMENT", "process-group")
    temp = tempfile.mkdtemp(prefix="t")  # short (socket paths), and nobody else's server in it
    try:
        monkeypatch.setattr(tempfile, "tempdir", temp)
        monkeypatch.setattr(hostdirs, "_bases", {})
        with Evaluator() as own:
            config = EvaluationConfig(episodes=2, jobs=1, episode_timeout=10.0)
            hunted = own.evaluate(
                program(FORK_SERVER_HUNT.format(temp=temp)), CounterBenchmark(), config
            )
            after = own.evaluate(program(GOOD), CounterBenchmark(), config)
    finally:
        hostdirs.remove_tree(temp)
        shutil.rmtree(temp, ignore_errors=True)
    reports = [re.search(r"found (\d+) closed (\d+)", r.stderr_tail) for r in hunted.records]
    assert all(reports), [r.stderr_tail for r in hunted.records]
    assert all(int(m.group(1)) >= 1 and m.group(1) == m.group(2) for m in reports if m)
    assert [e.status for e in after.episodes] == ["ok", "ok"]
