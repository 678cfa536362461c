"""``evopolicy serve-env``: the training environment over OpenEnv, driven by openenv-core's own
clients against a real server on a free loopback port.

A short real CartPole Run is recorded and exported (``rl`` and ``rl_tools``); the server is
the CLI command in a subprocess, serving that export into the same store. Sessions are
openenv's ``GenericEnvClient`` (dict actions and observations) and ``MCPToolClient``
(``list_tools``, ``call_tool``) over the WebSocket; ``/health`` and the token over plain HTTP.
Every session's Run must then verify with ``evopolicy record verify``.

Needs the training extra (openenv-core): without it the module skips saying
``uv sync --extra training``, and fails under ``EVOPOLICY_REQUIRE_EXTRAS=1``.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CLI, SMALL, cli
from tests.support.requires import require_extra

require_extra("training", "openenv")

pytestmark = pytest.mark.timeout(300)

TOKEN = "a-token-of-sixteen-or-more-chars"
TOOLS = {"finish", "list_files", "read_file", "submit", "write_file"}
SERVED = [  # a quick Run per session: 4 Episodes of budget, 2 to validate, 2 to assess
    "--episode-budget",
    "4",
    "--validation-episodes",
    "2",
    "--assessment-episodes",
    "2",
    "--jobs",
    "1",
    "--max-sessions",
    "2",
]


def _offline(home: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(home),
        "HF_DATASETS_CACHE": str(home / "datasets"),
    }
    env.pop("EVOPOLICY_STORE", None)
    env.pop("EVOPOLICY_SERVE_TOKEN", None)
    return env


@dataclass(frozen=True)
class Exported:
    store: Path
    dataset: Path
    split: str  # the one the task was hashed to
    row: dict[str, Any]  # its rl_tools row, as a trainer loads it
    home: Path


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    root = tmp_path_factory.mktemp("serve-env")
    store, dataset, home = root / "store", root / "dataset", root / "hf"
    ran = cli(
        "run", "--benchmark", "cartpole", "--agent", "reference", *SMALL, "--store", str(store)
    )
    assert ran.code == 0, ran.stderr
    done = cli(
        "export",
        "--format",
        "rl",
        "--format",
        "rl_tools",
        "--store",
        str(store),
        "--output",
        str(dataset),
    )
    assert done.code == 0, done.stderr
    (shard,) = (dataset / "rl_tools").glob("*.parquet")
    split = shard.name.split("-", 1)[0]
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _offline(home).items():
            if name.startswith("HF_"):
                patch.setenv(name, value)
        import datasets

        patch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        rows = datasets.load_dataset(
            str(dataset), "rl_tools", split=split, cache_dir=str(home / "datasets")
        )
        (row,) = rows
        yield Exported(store, dataset, split, dict(row), home)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    log: Path

    def stop(self) -> str:
        """Stop it (SIGTERM, as a service manager would); what it wrote on stderr."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.log.read_text()


def _start(exported: Exported, *args: str, env: dict[str, str] | None = None) -> Server:
    """``evopolicy serve-env`` on a free loopback port, once it has said where."""
    log = exported.home.parent / f"serve-env-{len(list(exported.home.parent.glob('*.log')))}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*CLI, "serve-env", "--store", str(exported.store), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env if env is not None else _offline(exported.home),
        )
    server = Server("", process, log)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 120)
    line = process.stdout.readline() if ready else ""
    found = re.search(r" on (http://\S+) ", line)
    if found is None:
        pytest.fail(f"serve-env did not start: {line!r}\n{server.stop()}")
    server.url = found.group(1)
    return server


@pytest.fixture(scope="module")
def server(exported: Exported) -> Iterator[Server]:
    started = _start(
        exported, "--dataset", str(exported.dataset), "--split", exported.split, *SERVED
    )
    yield started
    stderr = started.stop()
    assert "Traceback" not in stderr, stderr  # sessions that ended closed quietly


def _get(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _call(env: Any, tool: str, **arguments: Any) -> Any:
    return env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})


def _runs(exported: Exported) -> dict[str, dict[str, Any]]:
    listed = cli("record", "list", "--json", "--store", str(exported.store))
    assert listed.code == 0, listed.stderr
    return {run["run_id"]: run for run in json.loads(listed.stdout)}


# --------------------------------------------------------------------------- tests


def test_health_and_schema_over_http(server: Server) -> None:
    assert _get(f"{server.url}/health") == (200, {"status": "healthy"})
    status, schema = _get(f"{server.url}/schema")
    assert status == 200
    assert {"tool_name", "arguments"} <= set(schema["action"]["properties"])
    # A Run lives in a session: the stateless HTTP reset is not served.
    request = urllib.request.Request(f"{server.url}/reset", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 404
    assert "/ws" in json.loads(refused.value.read())["detail"]


def test_a_session_is_one_real_run_from_reset_to_reward(server: Server, exported: Exported) -> None:
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=server.url, message_timeout_s=240).sync() as env:
        reset = env.reset(task_id=exported.row["task_id"])
        task = reset.observation
        assert not reset.done and task["task_id"] == exported.row["task_id"]
        run_id = task["run_id"]
        assert isinstance(run_id, str) and run_id
        told = task["text"] or task["prompt"][0]["content"]  # the task, in tool form
        assert "cartpole" in told and "submit(episodes)" in told
        assert task["prompt"] == exported.row["prompt"]

        tools = env.step({"type": "list_tools"}).observation["tools"]
        assert {tool["name"] for tool in tools} == TOOLS
        listed = _call(env, "list_files").observation
        assert listed["error"] is None and "program/policy.py" in listed["result"]
        assert listed["run_id"] == run_id
        policy = _call(env, "read_file", path="program/policy.py").observation["result"]
        assert "def make_policy" in policy
        edited = policy + "\n# served: the same policy, edited\n"
        written = _call(env, "write_file", path="program/policy.py", content=edited)
        assert not written.observation["result"].startswith("error:")
        submitted = _call(env, "submit", episodes="0:2")
        assert not submitted.done and submitted.reward is None
        feedback = json.loads(submitted.observation["result"])
        assert feedback["submission_id"] == 1 and feedback["indices"] == [0, 1]

        # Bad calls are observations, never failed requests.
        unknown = _call(env, "rm_rf").observation
        assert unknown["result"] is None and unknown["error"]["error_type"] == "tool_not_found"
        misnamed = _call(env, "submit", selector="0:1").observation
        assert misnamed["error"]["error_type"] == "invalid_args"
        assert "episodes" in misnamed["error"]["message"]
        bad_selector = _call(env, "submit", episodes="9:99").observation
        assert bad_selector["error"] is None and bad_selector["result"].startswith("error:")
        outside = _call(env, "read_file", path="../../../../etc/passwd").observation
        assert outside["result"].startswith("error:") and "root:" not in outside["result"]
        state = env.state()
        assert state["episode_id"] == run_id and state["step_count"] == 6 and not state["done"]

        finished = _call(env, "finish", candidates=[1])
        assert finished.done and finished.observation["error"] is None
        # The selected program plays as the initial one on the same held-out Episodes.
        assert finished.reward == 0.0
        state = env.state()
        assert state["done"] and state["reward"] == finished.reward

    run = _runs(exported)[run_id]
    assert run["status"] == "finished" and run["agent"] == "trainer"
    verified = cli("record", "verify", "--store", str(exported.store))
    assert verified.code == 0, verified.stderr


def test_a_whole_row_resets_as_a_trainer_passes_it(server: Server, exported: Exported) -> None:
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=server.url, message_timeout_s=240).sync() as env:
        first = env.reset(**exported.row).observation
        second = env.reset(**exported.row).observation  # the first Run is concluded
        assert first["run_id"] != second["run_id"]
        with pytest.raises(RuntimeError, match="no task 'nope'"):
            env.reset(task_id="nope")
        with pytest.raises(RuntimeError, match="seed"):
            env.reset(index=0, seed=3)
    runs = _runs(exported)
    # Closed without a hand-off: ended as an Agent that exited, not left running.
    assert runs[first["run_id"]]["status"] == runs[second["run_id"]]["status"] == "agent_exited"


def test_two_sessions_at_once_are_two_runs(server: Server, exported: Exported) -> None:
    from openenv.core import GenericEnvClient
    from openenv.core.mcp_client import MCPToolClient
    from websockets.exceptions import ConnectionClosed

    with (
        GenericEnvClient(base_url=server.url, message_timeout_s=240).sync() as one,
        MCPToolClient(base_url=server.url, message_timeout_s=240).sync() as two,
    ):
        one.reset(index=0)
        two.reset(index=0)
        assert {tool.name for tool in two.list_tools()} == TOOLS
        assert "TASK.md" in two.call_tool("list_files")
        assert "TASK.md" in _call(one, "list_files").observation["result"]
        run_one, run_two = one.state()["episode_id"], two.state().episode_id
        assert run_one != run_two
        with pytest.raises(RuntimeError, match="unknown tool"):
            two.call_tool("delete_everything")  # MCPToolClient raises what step observes
        before = set(_runs(exported))
        third = GenericEnvClient(base_url=server.url).sync()
        # --max-sessions 2: the server answers CAPACITY_REACHED and closes, maybe before
        # the reset is sent.
        with third, pytest.raises((RuntimeError, ConnectionClosed)) as refused:
            third.reset(index=0)
        assert isinstance(refused.value, ConnectionClosed) or "CAPACITY" in str(refused.value)
        assert set(_runs(exported)) == before
    runs = _runs(exported)
    assert runs[run_one]["agent"] == runs[run_two]["agent"] == "trainer"
    verified = cli("record", "verify", "--store", str(exported.store))
    assert verified.code == 0, verified.stderr


def test_any_other_address_needs_a_token(exported: Exported) -> None:
    def serve_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, "serve-env", "--store", str(exported.store), *args],
            capture_output=True,
            text=True,
            env=_offline(exported.home),  # no EVOPOLICY_SERVE_TOKEN
            timeout=120,
            check=False,
        )

    for host in ("0.0.0.0", "192.0.2.7", "example.org"):
        refused = serve_env("--host", host)
        assert refused.returncode != 0 and refused.stdout == ""
        (line,) = refused.stderr.splitlines()
        assert line.startswith("error: ") and "EVOPOLICY_SERVE_TOKEN" in line
    short = serve_env("--token", "short")
    assert short.returncode != 0 and "at least 16 characters" in short.stderr


def test_with_a_token_every_request_carries_it(exported: Exported) -> None:
    from openenv.core import GenericEnvClient

    env = {**_offline(exported.home), "EVOPOLICY_SERVE_TOKEN": TOKEN}
    guarded = _start(exported, "--max-sessions", "1", env=env)
    try:
        assert _get(f"{guarded.url}/health")[0] == 401
        assert _get(f"{guarded.url}/health", "wrong-token-of-some-length")[0] == 401
        assert _get(f"{guarded.url}/health", TOKEN) == (200, {"status": "healthy"})
        with pytest.raises(ConnectionError, match="401"):
            GenericEnvClient(base_url=guarded.url).sync().connect()
        # The password of Basic credentials in the URL (websockets sends them) is the token.
        with_token = guarded.url.replace("http://", f"http://trainer:{TOKEN}@")
        with GenericEnvClient(base_url=with_token).sync() as session:
            assert session.state()["episode_id"] is None  # no reset: no Run
            with pytest.raises(RuntimeError, match="whole row"):
                session.reset(index=0)  # no --dataset: only whole rows
    finally:
        stderr = guarded.stop()
    assert "Traceback" not in stderr, stderr
