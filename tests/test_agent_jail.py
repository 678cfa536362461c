"""The Agent's jail against a hostile Agent, as root and as a non-root user, and failing
closed where it cannot be set up.

Each hostile attempt is ``tests/support/jailattack.py``: read the store, see or signal the Host,
unmount what hides the store (directly and from a nested user namespace), write the
Host's code, ``/etc`` or a sysctl, open a disk, hold root or capabilities, and leave a
daemon behind. A jailed Agent must fail every one.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import evopolicygym
from evopolicygym.agents import jail
from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.namespaces import containment_disabled
from evopolicygym.records.events import AgentMessages, RunCreated, RunFinished
from evopolicygym.records.location import open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.create import create_run
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import load_run

ATTACK = Path(__file__).parent / "support" / "jailattack.py"
JAIL = Path(jail.__file__)
NAMESPACES = JAIL.parent.parent / "namespaces.py"
UNPRIVILEGED = "evojail"  # the non-root user of these tests, made when run as root

pytestmark = pytest.mark.skipif(
    containment_disabled(), reason="containment turned off (EVOPOLICY_CONTAINMENT)"
)


def _nothing_succeeded(report: dict[str, bool]) -> None:
    assert set(report) >= {
        "store_readable",
        "host_signalable",
        "umounted_nested",
        "code_written",
        "root",
    }
    assert {name: done for name, done in report.items() if done} == {}


def _beacon_stopped(beacon: Path) -> bool:
    """The daemon the Agent left appends to ``beacon`` every 50 ms while it lives."""
    before = beacon.stat().st_size if beacon.exists() else 0
    time.sleep(0.5)
    return (beacon.stat().st_size if beacon.exists() else 0) == before


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", UNPRIVILEGED],
            check=True,
        )
        return pwd.getpwnam(UNPRIVILEGED)


def _jailed_attack(
    home: Path, python: str, jail_file: Path, attack_file: Path, user: pwd.struct_passwd | None
) -> tuple[dict[str, bool], Path]:
    """A Host stand-in of ``user`` (a sleeping process: its pid is the one to attack) and
    the jail it starts, with the attack as the Agent. The attack's report and its beacon."""
    store, code, scratch = home / "store", home / "code", home / "scratch"
    for directory in (store, code, scratch):
        directory.mkdir()
    (store / "events.db").write_text("the Host's log\n")
    (code / "host.py").write_text("print('the Host')\n")
    ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    if user is not None:
        for path in (home, store, code, scratch, store / "events.db", code / "host.py"):
            os.chown(path, user.pw_uid, user.pw_gid)
    host = subprocess.Popen(["sleep", "60"], **ids)  # type: ignore[call-overload]
    beacon = scratch / "beacon"
    target = {"store": str(store), "host_pid": host.pid, "code": str(code), "beacon": str(beacon)}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch)}
    try:
        done = subprocess.run(
            [
                python,
                "-I",
                "-S",
                str(jail_file),
                "--hide",
                str(store),
                "--read-only",
                str(code),
                "--writable",
                str(scratch),
                "--",
                python,
                str(attack_file),
                json.dumps(target),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=str(scratch),
            **ids,
        )
        assert host.poll() is None, "the Agent killed the Host"
    finally:
        host.kill()
        host.wait()
    assert done.returncode == 0, done.stderr
    assert (store / "events.db").read_text() == "the Host's log\n"
    assert not (code / "agent-was-here.py").exists()
    return json.loads(done.stdout.strip().splitlines()[-1]), beacon


def test_a_hostile_agent_is_contained_when_its_host_is_this_user(tmp_path: Path) -> None:
    report, beacon = _jailed_attack(tmp_path, sys.executable, JAIL, ATTACK, None)
    _nothing_succeeded(report)
    assert _beacon_stopped(beacon), "a daemon the Agent started outlived it"
    assert not Path("/etc/evopolicy-agent-was-here").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a second, non-root user needs root")
def test_a_hostile_agent_is_contained_when_its_host_is_not_root() -> None:
    """The same attack with the Host a non-root user: the jail runs from copies of its two
    files under the system's Python (this project's interpreter may lie where that user
    cannot reach), as the launcher runs it: a script of the standard library only."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the non-root user")
    user = _unprivileged_user()
    home = Path(tempfile.mkdtemp(prefix="evojail-"))
    try:
        os.chmod(home, 0o755)
        code = home / "jailcode"
        (code / "evopolicygym" / "agents").mkdir(parents=True)
        shutil.copy(NAMESPACES, code / "evopolicygym" / "namespaces.py")
        shutil.copy(JAIL, code / "evopolicygym" / "agents" / "jail.py")
        shutil.copy(ATTACK, code / "jailattack.py")
        subprocess.run(["chmod", "-R", "a+rX", str(code)], check=True)
        work = home / "work"
        work.mkdir()
        os.chown(work, user.pw_uid, user.pw_gid)
        report, beacon = _jailed_attack(
            work, python, code / "evopolicygym" / "agents" / "jail.py", code / "jailattack.py", user
        )
        _nothing_succeeded(report)
        assert _beacon_stopped(beacon), "a daemon the Agent started outlived it"
    finally:
        shutil.rmtree(home, ignore_errors=True)


HOSTILE_AGENT = r"""
import json, os, subprocess, sys
sys.path.insert(0, {root!r})
from tests.support.jailattack import attack
report = attack({target!r})
message = {{"role": "assistant", "content": json.dumps(report, sort_keys=True)}}
print(json.dumps(message), flush=True)
submit = ["./evopolicy", "session", "submit", "--episodes", "0:2"]
subprocess.run(submit, check=True, capture_output=True)
subprocess.run(["./evopolicy", "session", "finish", "1"], check=True, capture_output=True)
"""


def test_a_hostile_agent_in_a_run_cannot_reach_the_log_or_the_host(tmp_path: Path) -> None:
    """The whole Host (NumPy loaded, threads running) starts the jail for a hostile Agent:
    it reads no hidden seed, signals nothing, writes none of the Host's code, and the log
    it could not reach verifies; RunCreated says the Agent was contained."""
    store_dir = tmp_path / "store"
    beacon = tmp_path / "beacon"
    target = {
        "store": str(store_dir.resolve()),
        "host_pid": os.getpid(),
        "code": str(Path(evopolicygym.__file__).parent),
        "beacon": str(beacon),
    }
    agent = tmp_path / "agent.py"
    agent.write_text(HOSTILE_AGENT.format(root=str(ATTACK.parents[2]), target=target))
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=120.0,
    )
    launcher = ProviderLauncher()
    assert launcher.containment() == "namespaces"
    with open_store(store_dir, create=True) as store:
        identity = agent_identity("command", command=f"{sys.executable} {agent}")
        run_id = create_run(
            store, "cartpole", config, identity, agent_containment=launcher.containment()
        )
        RunHost(store, run_id, launcher=launcher).drive()
        _, events = load_run(store, run_id)
        assert verify_store(store).ok
    said = [
        m.content
        for e in events
        if isinstance(e, AgentMessages)
        for m in e.messages
        if m.role == "assistant"
    ]
    assert len(said) == 1
    _nothing_succeeded(json.loads(said[0]))
    assert _beacon_stopped(beacon)
    assert next(e for e in events if isinstance(e, RunCreated)).agent_containment == "namespaces"
    assert next(e for e in events if isinstance(e, RunFinished)).reason == "finished"


# --- failing closed ---------------------------------------------------------------------

NO_USER_NAMESPACES = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'


def _without_user_namespaces(
    command: list[str], **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """``command`` in a user namespace of its own that may create no further ones: as on a
    machine where unprivileged user namespaces are off, the jail cannot be set up."""
    if shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is not installed")
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", NO_USER_NAMESPACES, "sh", *command],
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,  # type: ignore[call-overload]
    )


def test_the_jail_refuses_to_start_an_agent_it_cannot_contain(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    refused = _without_user_namespaces(
        [sys.executable, "-I", "-S", str(JAIL), "--", "touch", str(marker)]
    )
    assert refused.returncode == jail.UNCONTAINED_EXIT
    assert (
        refused.stderr.startswith("jail: cannot contain the Agent (")
        and refused.stderr.count("\n") == 1
    )
    assert not marker.exists()
    allowed = _without_user_namespaces(
        [sys.executable, "-I", "-S", str(JAIL), "--allow-uncontained", "--", "touch", str(marker)]
    )
    assert allowed.returncode == 0 and marker.exists()
    assert "the Agent runs without containment" in allowed.stderr


FINISHING_AGENT = r"""
import subprocess
submit = ["./evopolicy", "session", "submit", "--episodes", "0:2"]
subprocess.run(submit, check=True, capture_output=True)
subprocess.run(["./evopolicy", "session", "finish", "1"], check=True, capture_output=True)
"""


def test_a_run_whose_agent_cannot_be_contained_refuses_to_start_unless_allowed(
    tmp_path: Path,
) -> None:
    """`evopolicy run` where no jail can be set up: one line naming the way out and nothing
    recorded; with --allow-uncontained-agent it runs, and the record says so."""
    agent = tmp_path / "agent.py"
    agent.write_text(FINISHING_AGENT)
    store = tmp_path / "store"
    run = [
        sys.executable,
        "-m",
        "evopolicygym.cli",
        "run",
        "--benchmark",
        "cartpole",
        "--budget",
        "4",
        "--validation-episodes",
        "2",
        "--max-candidates",
        "1",
        "--assessment-episodes",
        "2",
        "--agent",
        "command",
        "--agent-command",
        f"{sys.executable} {agent}",
        "--store",
        str(store),
        "--json",
    ]
    refused = _without_user_namespaces(run)
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "--allow-uncontained-agent" in lines[0]
        and "cannot be contained" in lines[0]
    )
    if store.exists():
        with open_store(store) as opened:
            assert list(opened.events.read_all()) == []
    allowed = _without_user_namespaces([*run, "--allow-uncontained-agent"])
    assert allowed.returncode == 0, allowed.stderr
    run_id = json.loads(allowed.stdout)["run_id"]
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "record",
            "--store",
            str(store),
            "show",
            run_id,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout)["agent_containment"] == "none"
    human = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "record", "--store", str(store), "show", run_id],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "NONE: the Agent ran uncontained" in human.stdout


def test_where_the_jail_holds_the_launcher_contains() -> None:
    launcher = ProviderLauncher()
    assert launcher.containment() == "namespaces"
    assert ProviderLauncher(allow_uncontained=True).containment() == "namespaces"


def test_the_launcher_says_why_it_cannot_contain(tmp_path: Path) -> None:
    """What the Host prints when the probe fails: the jail's reason and the way out."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import subprocess, sys\n"
        "from evopolicygym.agents.launcher import ProviderLauncher\n"
        "from evopolicygym.agents.providers import AgentError\n"
        "try:\n"
        "    ProviderLauncher().containment()\n"
        "except AgentError as exc:\n"
        "    print(exc)\n"
        "print(ProviderLauncher(allow_uncontained=True).containment())\n"
    )
    done = _without_user_namespaces([sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    why, allowed = done.stdout.strip().splitlines()
    assert why.startswith("cannot contain the Agent (") and "--allow-uncontained-agent" in why
    assert allowed == "none"
