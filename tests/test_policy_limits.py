"""Deadlines and CPU are enforced: the wall-clock Episode deadline whatever a policy's pace,
one core for a policy and everything it starts, and a syscall filter (issue 13, item 3).

Run as root and as a non-root user; what cannot hold on a machine (no seccomp for its
architecture, no writable cgroup v2 hierarchy) is skipped with the reason.
"""

from __future__ import annotations

import ast
import errno
import os
import platform
import re
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator, cgroups, seccomp
from evopolicygym.program import Program
from tests.support.toybench import CounterBenchmark

GOOD = """
class Policy:
    def act(self, obs):
        return 1 if obs[0] < obs[1] else 0

def make_policy(context):
    return Policy()
"""


def program(source: str) -> Program:
    return Program.from_files({"policy.py": textwrap.dedent(source)})


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator() as ev:
        yield ev


def evaluate(evaluator: Evaluator, source: str, horizon: int = 20, **config) -> EvaluationResult:
    settings = {"episodes": 1, "jobs": 1, "episode_timeout": 5.0, **config}
    return evaluator.evaluate(
        program(source), CounterBenchmark(horizon=horizon), EvaluationConfig(**settings)
    )


def reported(result: EvaluationResult, tag: str) -> list[object]:
    """The values a policy printed as ``<tag> <python literal>`` lines, in order."""
    tail = result.records[0].stderr_tail
    return [ast.literal_eval(m) for m in re.findall(rf"^{tag} (.*)$", tail, re.MULTILINE)]


def require(result: EvaluationResult, limit: str, why: str) -> None:
    if limit not in result.enforced:
        pytest.skip(f"{limit} does not hold here ({why}); held: {', '.join(result.enforced)}")


# --- the Episode deadline --------------------------------------------------------------------

PACED = """
import time
class P:
    def act(self, o):
        time.sleep({pause})
        return 0  # never reaches the target: only the deadline ends the Episode
def make_policy(c):
    return P()
"""


@pytest.mark.parametrize("pause", [0.045, 0.05])
@pytest.mark.timeout(60)  # a hang guard: before, these ran for the Environment's whole horizon
def test_the_deadline_holds_however_a_policy_paces_its_answers(
    evaluator: Evaluator, pause: float
) -> None:
    # Each answer comes back within (or right at) the Host's 50 ms receive slice: before,
    # the deadline was only looked at when a slice came back empty, so the policy played on.
    result = evaluate(evaluator, PACED.format(pause=pause), episode_timeout=1.0, horizon=10_000_000)
    episode = result.episodes[0]
    assert episode.status == "timeout", episode
    assert "deadline" in (episode.failure or "")
    # Every act() takes at least `pause`: no more of them fit in the 1 s budget.
    assert episode.steps <= int(1.0 / pause), episode
    assert episode.duration_s < 3.0, episode  # a generous bound: it ends at about 1 s


def test_a_paced_policy_within_its_deadline_finishes(evaluator: Evaluator) -> None:
    # At most 8 acts of 30 ms to reach the target: about a quarter of the 1 s budget.
    result = evaluate(
        evaluator, PACED.format(pause=0.03).replace("return 0", "return 1"), episode_timeout=1.0
    )
    assert result.episodes[0].status == "ok", result.episodes[0]


# --- the syscall filter ------------------------------------------------------------------------

AFFINITY = """
import os
class P:
    def act(self, o):
        try:
            os.sched_setaffinity(0, set(range(os.cpu_count())))
            print("outcome 'set'", flush=True)
        except OSError as exc:
            print(f"outcome {type(exc).__name__!r}", flush=True)
        print(f"affinity {sorted(os.sched_getaffinity(0))!r}", flush=True)
        return 1 if o[0] < o[1] else 0
def make_policy(c):
    return P()
"""


def test_a_policy_cannot_widen_its_cpu_affinity(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, AFFINITY)
    require(result, "seccomp", "no syscall filter for this architecture")
    assert result.episodes[0].status == "ok", result.episodes[0]
    assert set(reported(result, "outcome")) == {"PermissionError"}
    affinities = reported(result, "affinity")
    assert affinities and all(a == affinities[0] and len(a) == 1 for a in affinities), affinities
    assert "pinned-core" in result.enforced


REFUSED = """
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
NUMBERS = {numbers!r}
def call(name, *args):
    ret = libc.syscall(ctypes.c_long(NUMBERS[name]), *args)
    return (name, ret, ctypes.get_errno() if ret == -1 else 0)
def attempts():
    return [
        call("ptrace", 0, 0, None, None),  # PTRACE_TRACEME
        call("unshare", 0x10000000),  # CLONE_NEWUSER
        call("unshare", 0x00020000),  # CLONE_NEWNS
        call("setns", 0, 0),
        call("mount", b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None),
        call("keyctl", 0, 0, 0, 0, 0),
        call("bpf", 0, None, 0),
        call("perf_event_open", None, 0, -1, -1, 0),
        # CLONE_NEWUSER | SIGCHLD
        call("clone", ctypes.c_ulong(0x10000000 | 17), None, None, None, None),
    ]
# Threads and plain forks still work (clone3 answers ENOSYS; the C library falls back).
thread = threading.Thread(target=os.getpid)
thread.start()
thread.join()
child = os.fork()
if child == 0:
    os._exit(0)
assert os.waitpid(child, 0)[1] == 0
class P:
    def __init__(self):
        self.first = True
    def act(self, o):
        if self.first:
            self.first = False
            print(f"attempts {{attempts()!r}}", flush=True)
        return 1 if o[0] < o[1] else 0
def make_policy(c):
    return P()
"""


def test_tracing_namespaces_and_kernel_facilities_are_refused_and_the_episode_scores(
    evaluator: Evaluator,
) -> None:
    if not seccomp.available():
        pytest.skip(f"no syscall filter is known for {platform.machine()}")
    # First: without the filter, the raw clone below would really fork the policy mid-act.
    good = evaluate(evaluator, GOOD, episodes=2)
    require(good, "seccomp", "the kernel refused the filter")
    names = ("ptrace", "unshare", "setns", "mount", "keyctl", "bpf", "perf_event_open", "clone")
    source = REFUSED.format(numbers={name: seccomp.number(name) for name in names})
    result = evaluate(evaluator, source, episodes=2)
    assert [e.status for e in result.episodes] == ["ok", "ok"], result.episodes
    attempts = reported(result, "attempts")[0]
    assert attempts == [(name, -1, errno.EPERM) for name, _, _ in attempts], attempts
    assert len(attempts) == 9
    # Scored as the same policy without the attempts.
    assert [e.total_reward for e in result.episodes] == [e.total_reward for e in good.episodes]


def test_a_traced_stop_is_the_policys_failure_where_ptrace_is_allowed(evaluator: Evaluator) -> None:
    source = """
import ctypes, os, signal
class P:
    def act(self, o):
        ret = ctypes.CDLL(None, use_errno=True).ptrace(0, 0, None, None)
        print(f"ptrace {ret!r}", flush=True)
        os.kill(os.getpid(), signal.SIGUSR1)
        return 1 if o[0] < o[1] else 0
def make_policy(c):
    return P()
"""
    result = evaluate(evaluator, source, episode_timeout=1.5)
    episode = result.episodes[0]
    if "seccomp" in result.enforced:
        # Refused: nothing traces it. The signal kills it unless it is PID 1 of its namespace.
        assert reported(result, "ptrace")[0] == -1
        expected = "ok" if result.containment == "namespaces" else "exception"
        assert episode.status == expected, episode
    else:
        # Traced by the fork server, the signal stops it: the policy's failure, not the Host's.
        assert episode.status == "exception", episode
        assert "SIGUSR1" in (episode.failure or "")


# --- CPU: one core for a policy, its threads and its children ----------------------------------

BUSY_CHILDREN = """
import os, time
START = time.monotonic()
try:
    os.sched_setaffinity(0, set(range(os.cpu_count())))  # children would inherit this
except OSError:
    pass
KIDS = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, set(range(os.cpu_count())))
        except OSError:
            pass
        while True:
            pass
    KIDS.append(pid)
TICK = os.sysconf("SC_CLK_TCK")
def cpu_of(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK
class P:
    def act(self, o):
        tree = [os.getpid(), *KIDS]
        print(f"usage {(sum(cpu_of(p) for p in tree), time.monotonic() - START)!r}", flush=True)
        print(f"affinities {sorted({len(os.sched_getaffinity(p)) for p in tree})!r}", flush=True)
        print(f"cgroup {open('/proc/self/cgroup').read()!r}", flush=True)
        time.sleep(0.02)
        return 0
def make_policy(c):
    return P()
"""


@pytest.mark.timeout(60)
def test_busy_children_stay_on_the_policys_one_core(evaluator: Evaluator) -> None:
    result = evaluate(evaluator, BUSY_CHILDREN, episode_timeout=2.0, horizon=10_000_000)
    require(result, "pinned-core", "no syscall filter to keep the pinning")
    assert result.episodes[0].status == "timeout", result.episodes[0]
    assert reported(result, "affinities")[-1] == [1]  # the policy and all 8 children: one core
    cpu_s, wall_s = reported(result, "usage")[-1]
    # One core cannot give more CPU time than wall time (plus clock-tick rounding per process);
    # on two free cores the nine processes took about twice their wall time.
    assert cpu_s <= wall_s + 0.3, (cpu_s, wall_s)


def _cpu_usage_s(group: str) -> float:
    stat = dict(line.split() for line in Path(group, "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


@pytest.mark.timeout(60)
def test_a_cgroup_bounds_the_cpu_of_a_policy_and_its_children(evaluator: Evaluator) -> None:
    group = evaluator.fork_server.cgroup
    if group is None:
        pytest.skip(
            "no cgroup v2 group for policies here (cgroup v1 or a hybrid hierarchy without the cpu "
            "controller in v2, a read-only /sys/fs/cgroup, or no delegated subtree for this user)"
        )
    before = _cpu_usage_s(group)
    started = time.monotonic()
    # Not pinned: only the cgroup's cpu.max keeps the nine busy processes to one core.
    result = evaluate(
        evaluator, BUSY_CHILDREN, episode_timeout=2.0, horizon=10_000_000, pin_cpus=False
    )
    elapsed = time.monotonic() - started
    used = _cpu_usage_s(group) - before
    assert {"cgroup-cpu", "cgroup-memory", "cgroup-pids"} <= set(result.enforced), result.enforced
    assert result.episodes[0].status == "timeout", result.episodes[0]
    assert used <= elapsed + 0.3, (used, elapsed)
    # The policy ran in a leaf of the fork server's group, which is gone afterwards.
    path = reported(result, "cgroup")[-1]
    assert os.path.basename(group) in str(path), path
    deadline = time.monotonic() + 5
    while [p for p in Path(group).iterdir() if p.is_dir()] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in Path(group).iterdir() if p.is_dir()] == []


# --- the filter program and the cgroup search, without the kernel -------------------------------

_SECCOMP_DATA_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _run_filter(ops: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0) -> int:
    """A classic-BPF interpreter for the instructions the filter uses."""
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF, 20: arg0 >> 32}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_program_denies_what_it_lists_and_fails_closed(machine: str) -> None:
    ops = seccomp._program(machine)
    arch = _SECCOMP_DATA_ARCH[machine]
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    for name in seccomp.DENIED:
        assert _run_filter(ops, arch, seccomp.number(name, machine)) == eperm, name
    for harmless in (0, 1, 3, 63, 64, 100, 260):  # read, write, ... none of them denied
        if harmless not in {seccomp.number(n, machine) for n in seccomp.DENIED}:
            assert _run_filter(ops, arch, harmless) == allow, harmless
    clone = seccomp.number("clone", machine)
    assert _run_filter(ops, arch, clone, 17) == allow  # fork: SIGCHLD
    assert (
        _run_filter(ops, arch, clone, 0x3D0F00) == allow
    )  # a thread: CLONE_VM | CLONE_THREAD | ...
    for flag in (
        0x00020000,
        0x02000000,
        0x04000000,
        0x08000000,
        0x10000000,
        0x20000000,
        0x40000000,
    ):
        assert _run_filter(ops, arch, clone, flag | 17) == eperm, hex(flag)
    assert _run_filter(ops, arch, seccomp.number("clone3", machine)) == enosys
    # Another ABI on the same kernel (32-bit x86 through int 0x80, arm32): everything denied.
    for foreign in (0x40000003, 0x40000028):
        assert _run_filter(ops, foreign, 0) == eperm
        assert _run_filter(ops, foreign, 3) == eperm
    if machine == "x86_64":
        assert _run_filter(ops, arch, 0x40000000 | 1) == eperm  # x32


def _cgroup_tree(root: Path, subtree: dict[str, str]) -> None:
    for path, enabled in subtree.items():
        directory = root / path.strip("/")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cgroup.subtree_control").write_text(enabled)


def test_the_policy_cgroup_goes_under_the_nearest_cgroup_that_hands_cpu_down(
    tmp_path: Path,
) -> None:
    mountinfo = (
        f"31 1 0:27 / {tmp_path} rw,nosuid - cgroup2 cgroup2 rw\n"
        "32 1 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
    )
    _cgroup_tree(
        tmp_path,
        {
            "/": "cpu memory pids io",
            "/system.slice": "memory pids",
            "/system.slice/host.service": "",
        },
    )
    own = "0::/system.slice/host.service\n"
    # The Host's own cgroup holds processes, its parent hands no cpu down: the root does.
    assert cgroups.find_parent(mountinfo, own) == (str(tmp_path), ("cpu", "memory", "pids"))
    _cgroup_tree(tmp_path, {"/system.slice": "cpu pids"})
    assert cgroups.find_parent(mountinfo, own) == (str(tmp_path / "system.slice"), ("cpu", "pids"))
    # A hybrid system whose v2 hierarchy has none of them, and cgroup v1 alone: no group.
    assert cgroups.find_parent(mountinfo.replace(str(tmp_path), "/nonexistent"), own) is None
    assert (
        cgroups.find_parent(
            "32 1 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", "4:cpu:/\n"
        )
        is None
    )


def test_stale_groups_of_gone_fork_servers_are_swept(tmp_path: Path) -> None:
    gone = 2**22 + 12345  # above any pid_max default: no such process
    (tmp_path / f"evopolicy-{gone}-abcd" / "e1").mkdir(parents=True)
    (tmp_path / f"evopolicy-{os.getpid()}-abcd" / "e1").mkdir(parents=True)
    (tmp_path / "unrelated").mkdir()
    cgroups.sweep_stale(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"evopolicy-{os.getpid()}-abcd",
        "unrelated",
    ]
