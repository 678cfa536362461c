"""Every command, given bad input, says what is wrong in one line and exits non-zero.

Each row runs the real CLI in a subprocess: missing or non-existent paths, a file where a
directory is expected (and the reverse), unknown Runs and Benchmarks, bad ``--param`` values,
numbers out of range, non-finite timeouts, malformed SQL, unknown export formats, empty
strings and arguments that are not UTF-8. Each must exit non-zero with exactly one line on
stderr, ``error: ...``, naming what was wrong, and no traceback. A ``run`` row must fail
before any Run is recorded: its store is never created.

The rows run in parallel (those sharing a ``group`` in order, one after another); the few
that need a recorded Run wait for the one small Run the module records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from evopolicygym.protocol import SESSION_ENV, WORKSPACE_ENV
from evopolicygym.records.location import STORE_ENV, open_store

# Hundreds of CLI processes (~95 s): the end-to-end tier (`uv run pytest -m slow`).
pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "evopolicygym.cli"]
TIMEOUT = 120  # seconds: a row that hangs (or started real work) fails instead of blocking

# A Run that a row would start by mistake stays small.
RUN = [
    "run",
    "--store",
    "{fresh}",
    "--budget",
    "2",
    "--validation-episodes",
    "1",
    "--assessment-episodes",
    "1",
    "--max-candidates",
    "1",
    "--benchmark",
]
NOT_UTF8 = b"\xff\xfe"


@dataclass(frozen=True)
class Row:
    id: str
    args: tuple[str | bytes, ...]
    says: str  # what the error line must contain (case-insensitive)
    group: str | None = None  # rows of a group run one after another (they share a lock)

    @property
    def needs_run(self) -> bool:
        return any(isinstance(a, str) and "{run}" in a for a in self.args)


def row(id: str, *args: str | bytes, says: str, group: str | None = None) -> Row:
    return Row(id, args, says, group)


ROWS = [
    row("unknown-command", "no-such-command", says="no such command"),
    row("unknown-option", "--bogus", says="--bogus"),
    # evaluate
    row(
        "evaluate-missing-program",
        "evaluate",
        "{missing}",
        "--benchmark",
        "cartpole",
        says="cannot read program directory",
    ),
    row(
        "evaluate-program-is-a-file",
        "evaluate",
        "{file}",
        "--benchmark",
        "cartpole",
        says="must be a directory",
    ),
    row(
        "evaluate-program-without-policy",
        "evaluate",
        "{empty}",
        "--benchmark",
        "cartpole",
        says="no policy.py",
    ),
    row("evaluate-empty-program", "evaluate", "", "--benchmark", "cartpole", says="PROGRAM"),
    row(
        "evaluate-not-utf8-program",
        "evaluate",
        NOT_UTF8,
        "--benchmark",
        "cartpole",
        says="cannot read program directory",
    ),
    row(
        "evaluate-unknown-benchmark",
        "evaluate",
        "{program}",
        "--benchmark",
        "nope",
        says="unknown benchmark 'nope'",
    ),
    row(
        "evaluate-family-without-id",
        "evaluate",
        "{program}",
        "--benchmark",
        "gymnasium:",
        says="use gymnasium:<id>",
    ),
    row(
        "evaluate-param-not-a-number",
        "evaluate",
        "{program}",
        "--benchmark",
        "gymnasium:MountainCarContinuous-v0",
        "--param",
        "goal_velocity=abc",
        says="--param goal_velocity=abc",
    ),
    row(
        "evaluate-param-not-key-value",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--param",
        "oops",
        says="--param",
    ),
    row(
        "evaluate-zero-episodes",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--episodes",
        "0",
        says="--episodes",
    ),
    row(
        "evaluate-too-many-episodes",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--episodes",
        "2000000000",
        says="--episodes",
    ),
    row(
        "evaluate-zero-timeout",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--episode-timeout",
        "0",
        says="--episode-timeout",
    ),
    row(
        "evaluate-negative-timeout",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--episode-timeout",
        "-1",
        says="--episode-timeout",
    ),
    row(
        "evaluate-nan-timeout",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--episode-timeout",
        "nan",
        says="--episode-timeout",
    ),
    row(
        "evaluate-zero-memory",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--memory-mb",
        "0",
        says="--memory-mb",
    ),
    row(
        "evaluate-negative-seed",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--seed",
        "-1",
        says="--seed",
    ),
    row(
        "evaluate-unknown-split",
        "evaluate",
        "{program}",
        "--benchmark",
        "cartpole",
        "--split",
        "nope",
        says="unknown split 'nope'",
    ),
    # benchmarks
    row("show-unknown", "benchmarks", "show", "nope", says="unknown benchmark 'nope'"),
    row("check-empty-id", "benchmarks", "check", "", says="unknown benchmark ''"),
    row("show-not-utf8-id", "benchmarks", "show", NOT_UTF8, says="unknown benchmark"),
    row("show-unknown-gymnasium-id", "benchmarks", "show", "gymnasium:NoSuch-v0", says="NoSuch-v0"),
    row(
        "show-param-a-curated-one-does-not-take",
        "benchmarks",
        "show",
        "cartpole",
        "--param",
        "x=1",
        says="invalid parameters",
    ),
    row(
        "show-param-the-environment-does-not-take",
        "benchmarks",
        "show",
        "gymnasium:CartPole-v1",
        "--param",
        "foo=bar",
        says="no parameter 'foo'",
    ),
    row(
        "check-param-not-a-bool",
        "benchmarks",
        "check",
        "gymnasium:CartPole-v1",
        "--param",
        "sutton_barto_reward=3",
        says="takes true or false for sutton_barto_reward",
    ),
    row(
        "show-param-not-an-int",
        "benchmarks",
        "show",
        "gymnasium:CartPole-v1",
        "--param",
        "max_episode_steps=2.5",
        says="takes an integer for max_episode_steps",
    ),
    row(
        "show-param-the-environment-refuses",
        "benchmarks",
        "show",
        "gymnasium:FrozenLake-v1",
        "--param",
        "map_name=9x9",
        says="refuses --param map_name",
    ),
    row("benchmarks-list-unknown-option", "benchmarks", "list", "--bogus", says="--bogus"),
    # run: every row fails before a Run is recorded
    row("run-unknown-benchmark", *RUN, "nope", says="unknown benchmark 'nope'"),
    row("run-family-without-id", *RUN, "gymnasium", says="use gymnasium:<id>"),
    row("run-zero-budget", *RUN, "cartpole", "--budget", "0", says="--budget"),
    row(
        "run-nan-episode-timeout",
        *RUN,
        "cartpole",
        "--episode-timeout",
        "nan",
        says="--episode-timeout",
    ),
    row("run-zero-agent-timeout", *RUN, "cartpole", "--agent-timeout", "0", says="--agent-timeout"),
    row("run-unknown-agent", *RUN, "cartpole", "--agent", "nope", says="--agent"),
    row(
        "run-missing-program",
        *RUN,
        "cartpole",
        "--program",
        "{missing}",
        says="cannot read program directory",
    ),
    row(
        "run-program-is-a-file", *RUN, "cartpole", "--program", "{file}", says="must be a directory"
    ),
    row("run-empty-program", *RUN, "cartpole", "--program", "", says="--program"),
    row("run-workspace-is-a-file", *RUN, "cartpole", "--workspace", "{file}", says="--workspace"),
    row("run-empty-workspace", *RUN, "cartpole", "--workspace", "", says="--workspace"),
    row(
        "run-feedback-traces-not-a-count",
        *RUN,
        "cartpole",
        "--feedback-traces",
        "some",
        says="--feedback-traces",
    ),
    row(
        "run-feedback-traces-without-trajectories",
        *RUN,
        "cartpole",
        "--feedback-traces",
        "2",
        "--record-trajectories",
        "none",
        says="--record-trajectories",
    ),
    row(
        "run-store-is-a-file", *RUN, "cartpole", "--store", "{file}", says="not a directory"
    ),  # the last --store counts
    row("run-empty-store", *RUN, "cartpole", "--store", "", says="--store"),
    row(
        "run-param-not-a-number",
        *RUN,
        "gymnasium:MountainCarContinuous-v0",
        "--param",
        "goal_velocity=abc",
        says="--param goal_velocity=abc",
    ),
    row(
        "run-more-per-submission-than-the-pool",
        *RUN,
        "cartpole",
        "--max-episodes-per-submission",
        "100",
        says="--max-episodes-per-submission",
    ),
    row("run-same-splits", *RUN, "cartpole", "--train-split", "validation", says="--train-split"),
    row(
        "run-budget-that-cannot-be-spent",
        *RUN,
        "cartpole",
        "--finish-policy",
        "require_budget_exhaustion",
        "--max-submissions",
        "1",
        "--max-episodes-per-submission",
        "1",
        says="--finish-policy",
    ),
    row("run-missing-skill", *RUN, "cartpole", "--skill", "{missing}", says="not a directory"),
    row(
        "run-unbalanced-agent-command",
        *RUN,
        "cartpole",
        "--agent",
        "command",
        "--agent-command",
        "'unbalanced",
        says="--agent-command",
    ),
    row("run-agent-env-with-a-value", *RUN, "cartpole", "--agent-env", "A=B", says="--agent-env"),
    row(
        "run-unknown-effort",
        *RUN,
        "cartpole",
        "--agent",
        "codex",
        "--effort",
        "ultra",
        says="--effort",
    ),
    row(
        "run-chat-base-url-not-a-url",
        *RUN,
        "cartpole",
        "--agent",
        "chat",
        "--model",
        "m",
        "--base-url",
        "notaurl",
        says="--base-url",
    ),
    # serve-env: checked before anything is imported or started
    row(
        "serve-env-public-without-token",
        "serve-env",
        "--host",
        "0.0.0.0",
        "--store",
        "{estore}",
        says="needs a token",
    ),
    row("serve-env-short-token", "serve-env", "--token", "short", says="at least 16"),
    # view: the same access rules, checked before anything is imported or opened
    row(
        "view-public-without-token",
        "view",
        "--host",
        "0.0.0.0",
        "--store",
        "{estore}",
        says="EVOPOLICY_VIEW_TOKEN",
    ),
    row("view-short-token", "view", "--token", "short", "--store", "{estore}", says="at least 16"),
    row("view-port-out-of-range", "view", "--port", "70000", says="--port"),
    # resume
    row("resume-unknown-run", "resume", "nope", "--store", "{estore}", says="no run 'nope'"),
    row("resume-store-is-a-file", "resume", "nope", "--store", "{file}", says="{file}"),
    row("resume-not-utf8-run", "resume", NOT_UTF8, "--store", "{estore}", says="not valid UTF-8"),
    row("resume-no-run", "resume", says="missing argument 'RUN'"),
    # query: one after another (the read models are refreshed under a lock)
    row(
        "query-malformed-sql",
        "query",
        "selec 1",
        "--store",
        "{estore}",
        says="syntax error",
        group="query",
    ),
    row("query-empty-sql", "query", "", "--store", "{estore}", says="no statement", group="query"),
    row(
        "query-unknown-table",
        "query",
        "select * from nope",
        "--store",
        "{estore}",
        says="nope",
        group="query",
    ),
    row(
        "query-file-access",
        "query",
        "copy runs to 'x.csv'",
        "--store",
        "{estore}",
        says="query failed",
        group="query",
    ),
    row("query-missing-store", "query", "select 1", "--store", "{missing}", says="no store"),
    row(
        "query-json-and-csv",
        "query",
        "select 1",
        "--store",
        "{estore}",
        "--json",
        "--csv",
        says="--json and --csv",
        group="query",
    ),
    # export (few rows: each one imports the dataset libraries)
    row(
        "export-unknown-format",
        "export",
        "--format",
        "nope",
        "--output",
        "{missing}",
        "--store",
        "{estore}",
        says="--format",
    ),
    row(
        "export-output-is-a-file",
        "export",
        "--format",
        "sft",
        "--output",
        "{file}",
        "--store",
        "{estore}",
        says="not a directory",
    ),
    row(
        "export-test-fraction-out-of-range",
        "export",
        "--format",
        "sft",
        "--output",
        "{missing}",
        "--store",
        "{estore}",
        "--test-fraction",
        "2",
        says="--test-fraction must be in [0, 1)",
    ),
    row(
        "export-empty-hub-repo",
        "export",
        "--format",
        "sft",
        "--output",
        "{missing}",
        "--store",
        "{estore}",
        "--push-to-hub",
        "",
        says="--push-to-hub",
    ),
    # experiment
    row(
        "experiment-run-missing-spec",
        "experiment",
        "run",
        "{missing}",
        "--store",
        "{fresh}",
        says="no such file",
    ),
    row(
        "experiment-run-spec-not-toml",
        "experiment",
        "run",
        "{file}",
        "--store",
        "{fresh}",
        says="not toml",
    ),
    row(
        "experiment-run-spec-is-a-directory",
        "experiment",
        "run",
        "{empty}",
        "--store",
        "{fresh}",
        says="is a directory",
    ),
    row(
        "experiment-run-negative-retries",
        "experiment",
        "run",
        "{file}",
        "--retries",
        "-1",
        "--store",
        "{fresh}",
        says="--retries",
    ),
    row(
        "experiment-run-zero-max-runs",
        "experiment",
        "run",
        "{file}",
        "--max-runs",
        "0",
        "--store",
        "{fresh}",
        says="--max-runs",
    ),
    row(
        "experiment-status-unknown",
        "experiment",
        "status",
        "nope",
        "--store",
        "{estore}",
        says="no experiment 'nope'",
    ),
    row(
        "experiment-list-missing-store",
        "experiment",
        "list",
        "--store",
        "{missing}",
        says="no store at",
    ),
    row(
        "experiment-summary-unknown",
        "experiment",
        "summary",
        "nope",
        "--store",
        "{estore}",
        says="no experiment 'nope'",
    ),
    row(
        "experiment-summary-missing-store",
        "experiment",
        "summary",
        "x",
        "--store",
        "{missing}",
        says="no store",
    ),
    # report
    row(
        "report-neither-run-nor-experiment",
        "report",
        "-o",
        "{empty}/r.html",
        "--store",
        "{estore}",
        says="give a RUN or --experiment",
    ),
    row(
        "report-both-run-and-experiment",
        "report",
        "{run}",
        "--experiment",
        "e",
        "-o",
        "{empty}/r.html",
        "--store",
        "{store}",
        says="give a RUN or --experiment",
    ),
    row(
        "report-unknown-run",
        "report",
        "nope",
        "-o",
        "{empty}/r.html",
        "--store",
        "{estore}",
        says="no run 'nope'",
    ),
    row(
        "report-unknown-experiment",
        "report",
        "--experiment",
        "nope",
        "-o",
        "{empty}/r.html",
        "--store",
        "{estore}",
        says="no experiment 'nope'",
    ),
    row(
        "report-output-in-a-missing-directory",
        "report",
        "{run}",
        "-o",
        "{missing}/sub/r.html",
        "--store",
        "{store}",
        says="no directory",
    ),
    row(
        "report-output-is-a-directory",
        "report",
        "{run}",
        "-o",
        "{empty}",
        "--store",
        "{store}",
        says="is a directory",
    ),
    row(
        "report-missing-store",
        "report",
        "x",
        "-o",
        "{empty}/r.html",
        "--store",
        "{missing}",
        says="no store",
    ),
    # quickstart
    row("quickstart-store-is-a-file", "quickstart", "--store", "{file}", says="not a directory"),
    row(
        "quickstart-zero-budget",
        "quickstart",
        "--budget",
        "0",
        "--store",
        "{fresh}",
        says="--budget",
    ),
    # record
    row("record-list-missing-store", "record", "list", "--store", "{missing}", says="no store"),
    row(
        "record-list-store-is-a-file", "record", "--store", "{file}", "list", says="not a directory"
    ),
    row("record-create-empty-store", "record", "create", "--store", "", says="--store"),
    row(
        "record-show-unknown-run",
        "record",
        "show",
        "nope",
        "--store",
        "{estore}",
        says="no run 'nope'",
    ),
    row(
        "record-show-not-utf8-run",
        "record",
        "show",
        NOT_UTF8,
        "--store",
        "{estore}",
        says="not valid UTF-8",
    ),
    row(
        "record-events-unknown-run",
        "record",
        "events",
        "nope",
        "--store",
        "{estore}",
        says="no run 'nope'",
    ),
    row("record-head-missing-store", "record", "head", "--store", "{missing}", says="no store"),
    row(
        "record-verify-bad-anchor",
        "record",
        "verify",
        "--anchor",
        "garbage",
        "--store",
        "{estore}",
        says="POSITION:HASH",
    ),
    row(
        "record-replay-unknown-run",
        "record",
        "replay",
        "nope",
        "--store",
        "{estore}",
        says="no run 'nope'",
    ),
    row(
        "record-logs-unknown-run",
        "record",
        "logs",
        "nope",
        "--store",
        "{estore}",
        says="no run 'nope'",
    ),
    row(
        "record-logs-unknown-attempt",
        "record",
        "logs",
        "{run}",
        "--attempt",
        "99",
        "--store",
        "{store}",
        says="--attempt 99",
    ),
    row(
        "record-checkout-unknown-submission",
        "record",
        "checkout",
        "{run}",
        "999",
        "{missing}",
        "--store",
        "{store}",
        says="no submission 999",
    ),
    row(
        "record-checkout-into-a-file",
        "record",
        "checkout",
        "{run}",
        "1",
        "{file}",
        "--store",
        "{store}",
        says="not a directory",
    ),
    row(
        "record-schema-output-is-a-file", "record", "schema", "--output", "{file}", says="--output"
    ),
    # agents
    row("agents-list-unknown-option", "agents", "list", "--bogus", says="--bogus"),
    # session (the Agent's side): no session, or a socket nobody listens on
    row(
        "session-submit-without-a-session",
        "session",
        "submit",
        "{program}",
        "--episodes",
        "0:2",
        says=f"${SESSION_ENV} is not set",
    ),
    row(
        "session-submit-missing-socket",
        "session",
        "submit",
        "{program}",
        "--episodes",
        "0:2",
        "--socket",
        "{missing}",
        says="cannot connect",
    ),
    row("session-finish-empty-socket", "session", "finish", "1", "--socket", "", says="--socket"),
    row(
        "session-finish-not-an-id", "session", "finish", "abc", says="'abc' is not a valid integer"
    ),
    row(
        "session-finish-id-out-of-range",
        "session",
        "finish",
        str(2**64),
        says="is not a Submission id",
    ),
]


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    fresh: Path  # the store a `run` row was given, which must not exist afterwards


def _setup(root: Path) -> dict[str, str]:
    (root / "a-file").write_text("not a directory\n")
    (root / "empty").mkdir()
    (root / "program").mkdir()
    (root / "program" / "policy.py").write_text(
        "def make_policy(context):\n    return lambda observation: 0\n"
    )
    with open_store(root / "empty-store", create=True):
        pass
    (root / "cwd").mkdir()
    return {
        "file": str(root / "a-file"),
        "empty": str(root / "empty"),
        "program": str(root / "program"),
        "estore": str(root / "empty-store"),
        "store": str(root / "store"),
    }


def _env(root: Path) -> dict[str, str]:
    # The servers' token variables: their rows are about a public address without one.
    hidden = (SESSION_ENV, WORKSPACE_ENV, "EVOPOLICY_SERVE_TOKEN", "EVOPOLICY_VIEW_TOKEN")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env[STORE_ENV] = str(root / "default-store")  # never the working directory's
    env["COLUMNS"] = "80"
    return env


def _invoke(row: Row, root: Path, paths: dict[str, str]) -> Outcome:
    case = root / "rows" / row.id
    values = {**paths, "missing": str(case / "missing"), "fresh": str(case / "fresh")}
    args = [a if isinstance(a, bytes) else a.format(**values) for a in row.args]
    done = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        cwd=root / "cwd",
        env=_env(root),
        timeout=TIMEOUT,
        check=False,
    )
    decode = lambda data: data.decode("utf-8", "backslashreplace")  # noqa: E731
    return Outcome(done.returncode, decode(done.stdout), decode(done.stderr), Path(values["fresh"]))


def _record_a_run(root: Path, paths: dict[str, str]) -> str:
    done = subprocess.run(
        [*CLI, *(paths["store"] if a == "{fresh}" else a for a in RUN), "cartpole", "--json"],
        capture_output=True,
        text=True,
        cwd=root / "cwd",
        env=_env(root),
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    run_id: str = json.loads(done.stdout)["run_id"]
    return run_id


def _in_order(rows: list[Row], root: Path, paths: dict[str, str]) -> dict[str, Outcome]:
    return {row.id: _invoke(row, root, paths) for row in rows}


@dataclass(frozen=True)
class Results:
    outcomes: dict[str, Outcome]
    paths: dict[str, str]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    root = tmp_path_factory.mktemp("bad-inputs")
    paths = _setup(root)
    groups: dict[str, list[Row]] = {}
    for r in ROWS:
        groups.setdefault(r.group or r.id, []).append(r)
    with ThreadPoolExecutor(max_workers=4) as pool:
        recorded = pool.submit(_record_a_run, root, paths)
        futures: list[Future[dict[str, Outcome]]] = [
            pool.submit(_in_order, rows, root, paths)
            for rows in groups.values()
            if not any(r.needs_run for r in rows)
        ]
        with_run = {**paths, "run": recorded.result()}
        futures += [
            pool.submit(_in_order, rows, root, with_run)
            for rows in groups.values()
            if any(r.needs_run for r in rows)
        ]
        found: dict[str, Outcome] = {}
        for future in futures:
            found.update(future.result())
    return Results(found, paths)


def test_the_table_reaches_every_command() -> None:
    from tests.support.cli import COMMANDS

    leaves = {
        path.removeprefix("evopolicy ")
        for path, command in COMMANDS
        if not hasattr(command, "commands")
    }
    reached = {" ".join(str(a) for a in r.args[:n]) for r in ROWS for n in (1, 2)}
    assert leaves - reached == set()


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_one_line_and_a_non_zero_exit(row: Row, results: Results) -> None:
    outcome = results.outcomes[row.id]
    shown = f"rc={outcome.returncode}\nstdout:\n{outcome.stdout}\nstderr:\n{outcome.stderr}"
    assert outcome.returncode != 0, shown
    assert "Traceback" not in outcome.stdout + outcome.stderr, shown
    lines = outcome.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert row.says.format(**results.paths).lower() in lines[0].lower(), shown
    if row.args[0] in ("run", "quickstart"):
        assert not outcome.fresh.exists(), f"{row.id}: a store was created: {shown}"


def test_a_param_value_of_the_right_type_is_taken() -> None:
    done = subprocess.run(
        [
            *CLI,
            "benchmarks",
            "show",
            "gymnasium:MountainCarContinuous-v0",
            "--param",
            "goal_velocity=0.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["environment_parameters"]["goal_velocity"] == 0.5
