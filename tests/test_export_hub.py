"""``evopolicy export --push-to-hub`` for real, against a Hub on loopback
(tests/support/hubstub.py).

huggingface_hub reads HF_ENDPOINT when imported, so the CLI runs in
subprocesses pointed at the stub. Each CLI start pays ~3 s of imports, so the
module starts every independent push at once and each test waits for its own.
Two clients are covered: with hf_xet installed (as here) ``upload_folder``
streams through its pipeline and the stub answers "regular" for every file;
without it (HF_HUB_DISABLE_XET=1) it goes through ``create_commit`` and, as on
the Hub, parquet files go through git-LFS (batch, upload, verify).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evopolicygym.records.location import open_store
from tests.support.hubstub import HubStub
from tests.support.runlogs import Planned, SynthRun, policy_source, write_run

# Real git and LFS pushes to a local hub: the end-to-end tier (`uv run pytest -m slow`).
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

TOKEN = "hf_stubTokenForLoopbackTests0123456789"
WRONG_TOKEN = "hf_wrongTokenThatTheHubRejects987654"
# client -> (suffixes the stub keeps in LFS, the client's extra environment)
TRANSPORTS = {
    "xet-client": ((), {}),
    "lfs-client": ((".parquet",), {"HF_HUB_DISABLE_XET": "1"}),
}
SHARD = re.compile(
    r"(?P<config>sft|rl)/(?P<split>train|test)-(?P<i>\d{5})-of-(?P<n>\d{5})-(?P<tag>[0-9a-f]+)\.parquet"
)
# What an older export left on main of the repos the branch and pull request pushes target.
STALE = {
    "README.md": b"---\nconfigs: []\n---\n# an older export\n",
    "sft/train-00000-of-00001-000000000000.parquet": b"PAR1 stale PAR1",
}
COMMIT = "POST /api/{type}s/{repo}/commit/{rev}"
LFS_BATCH = "POST /{type}s/{repo}.git/info/lfs/objects/batch"
_PROXIES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


# ---------------------------------------------------------------------------- helpers


def write_runs(root: Path, numbers: range, *, noise: int = 0) -> Path:
    """Runs ``run-NNNN`` over two Benchmarks; ``noise`` random bytes in a policy make its rows
    big."""
    with open_store(root, create=True) as store:
        for i in numbers:
            source = policy_source(0.5 + i)
            if noise:
                source += f"# {random.Random(i).randbytes(noise).hex()}\n"
            write_run(
                store,
                SynthRun(
                    run_id=f"run-{i:04d}",
                    benchmark_id=f"toy-{i % 2}",
                    submissions=[
                        Planned({"policy.py": source}, [0, 1], [1.0, 2.0]),
                        Planned({"policy.py": policy_source(1.5 + i)}, [2, 3], [3.0, 4.0]),
                    ],
                ),
            )
    return root


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Launched:
    """The module's CLI runs: started at once, each awaited by the test that needs it."""

    work: Path
    hubs: dict[str, HubStub]
    processes: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    results: dict[str, Done] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)

    def output(self, name: str) -> Path:
        return self.outputs[name]

    def start(
        self,
        name: str,
        store: Path,
        args: list[str],
        *,
        endpoint: str | None,
        token: str = TOKEN,
        env: dict[str, str] | None = None,
        output: Path | None = None,
    ) -> None:
        """``evopolicy export --format sft --format rl ARGS`` of ``store`` into ``output``
        (by default a new directory named for the run)."""
        output = self.outputs[name] = output or self.work / name.replace("/", "-")
        environ = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HF_", "HUGGING_FACE")) and k.lower() not in _PROXIES
        }
        environ |= {
            "HF_HOME": str(self.work / "hf-home"),  # no saved login, no cache of the user's
            "HF_TOKEN": token,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "COLUMNS": "400",  # rich must not wrap the printed URL
            **({"HF_ENDPOINT": endpoint} if endpoint else {}),
            **(env or {}),
        }
        command = [sys.executable, "-m", "evopolicygym.cli", "export", "--store", str(store)]
        self.processes[name] = subprocess.Popen(
            [*command, "-o", str(output), "--format", "sft", "--format", "rl", *args],
            cwd=self.work,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def done(self, name: str, timeout: float = 150) -> Done:
        if name not in self.results:
            process = self.processes[name]
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()  # the process this module started, by its handle
                stdout, stderr = process.communicate()
                self.results[name] = Done(-9, stdout, stderr)
                pytest.fail(f"{name}: evopolicy export did not finish in {timeout} s:\n{stderr}")
            self.results[name] = Done(process.returncode, stdout, stderr)
        return self.results[name]


def local_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def assert_export_layout(files: dict[str, bytes]) -> None:
    """README.md, export.json and sft and rl shards, each split's shards one whole family."""
    assert {"README.md", "export.json"} <= files.keys()
    shards = [SHARD.fullmatch(p) for p in files if p not in ("README.md", "export.json")]
    assert all(shards), sorted(files)
    families: dict[tuple[str, str], set[tuple[int, int, str]]] = {}
    for m in shards:
        assert m is not None
        families.setdefault((m["config"], m["split"]), set()).add(
            (int(m["i"]), int(m["n"]), m["tag"])
        )
    assert {config for config, _ in families} == {"sft", "rl"}
    for key, family in families.items():
        (total,) = {n for _, n, _ in family}
        assert len({tag for _, _, tag in family}) == 1, (key, family)
        assert sorted(i for i, _, _ in family) == list(range(total)), (key, family)


def assert_complete(output: Path) -> None:
    """The local export is whole: every shard its manifest names, with its rows."""
    manifest = json.loads((output / "export.json").read_text())
    assert (output / "README.md").is_file()
    assert sorted(manifest["configs"]) == ["rl", "sft"]
    for name, config in manifest["configs"].items():
        for split in config["splits"].values():
            rows = sum(pq.ParquetFile(output / name / f).metadata.num_rows for f in split["files"])
            assert rows == split["rows"]
    assert_export_layout(local_files(output))


def assert_honest(hub: HubStub) -> None:
    assert hub.unexpected == [], "the client called endpoints the stub does not serve"
    assert hub.failures == []


def one_error_line(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------- the runs


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    work = tmp_path_factory.mktemp("hub")
    small = write_runs(work / "small-store", range(4))
    growing = write_runs(work / "growing-store", range(4), noise=1500)
    lfs = {
        **{t: suffixes for t, (suffixes, _) in TRANSPORTS.items()},
        "failures": (),
        "replace": (),
    }
    with contextlib.ExitStack() as stack:
        # Small tree pages: listing the files to delete must follow the Hub's pagination.
        hubs = {
            name: stack.enter_context(
                HubStub(
                    TOKEN, lfs_suffixes=suffixes, tree_page_size=2, private_by_default=("evo-org",)
                )
            )
            for name, suffixes in lfs.items()
        }
        run = Launched(work, hubs)
        for transport, (_, env) in TRANSPORTS.items():
            hub = hubs[transport]
            hub.commit_files("evo-user/pr-runs", STALE, message="an older export")
            push = ["--push-to-hub", "evo-user/private-runs", "--private"]
            run.start(f"{transport}/private", small, push, endpoint=hub.endpoint, env=env)
            push = ["--push-to-hub", "evo-user/pr-runs", "--create-pr", "--json"]
            run.start(f"{transport}/pr", small, push, endpoint=hub.endpoint, env=env)
        xet = hubs["xet-client"].endpoint
        run.start("org-default", small, ["--push-to-hub", "evo-org/runs"], endpoint=xet)
        hubs["xet-client"].commit_files("evo-user/branch-runs", STALE, message="an older export")
        push = ["--push-to-hub", "evo-user/branch-runs", "--revision", "dev"]
        run.start("dev", small, push, endpoint=xet)
        push = ["--push-to-hub", "evo-user/runs"]
        run.start("replace/first", growing, push, endpoint=hubs["replace"].endpoint)

        failing = hubs["failures"].endpoint
        push = ["--push-to-hub", "evo-user/denied"]
        run.start("wrong-token", small, push, endpoint=failing, token=WRONG_TOKEN)
        nowhere = f"http://127.0.0.1:{closed_port()}"
        run.start("unreachable", small, ["--push-to-hub", "evo-user/offline"], endpoint=nowhere)
        run.start("private-alone", small, ["--private"], endpoint=failing)
        push = ["--push-to-hub", "evo-user/both", "--revision", "dev", "--create-pr"]
        run.start("revision-and-pr", small, push, endpoint=failing)
        try:
            yield run
        finally:
            for name in run.processes:
                with contextlib.suppress(pytest.fail.Exception):
                    run.done(name)


# ---------------------------------------------------------------------------- pushes


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_push_creates_the_repo_holding_exactly_the_export(
    launched: Launched, transport: str
) -> None:
    done, hub = launched.done(f"{transport}/private"), launched.hubs[transport]
    assert done.returncode == 0, done.stderr
    repo = hub.repo("evo-user/private-runs")
    assert repo.private
    files = local_files(launched.output(f"{transport}/private"))
    assert_export_layout(files)
    assert repo.files("main") == files  # byte for byte, nothing more
    export_commit, initial = repo.history("main")
    assert export_commit.title == "evopolicy export: rl, sft"
    assert initial.files == {}
    assert (
        f"pushed: {hub.endpoint}/datasets/evo-user/private-runs/commit/{export_commit.oid}"
        in done.stdout
    )
    asked = {"name": "private-runs", "organization": "evo-user", "visibility": "private"}
    assert asked | {"type": "dataset"} in hub.created
    assert "POST /api/repos/create" in hub.routes_used() and COMMIT in hub.routes_used()
    if transport == "lfs-client":
        # As on the Hub: the parquet shards through git-LFS, the card and the manifest inline.
        assert LFS_BATCH in hub.routes_used()
        in_lfs = {p for p, blob in export_commit.files.items() if blob.lfs}
        assert in_lfs == {p for p in files if p.endswith(".parquet")}
    else:
        assert LFS_BATCH not in hub.routes_used()
    assert_honest(hub)


def test_push_without_private_keeps_the_namespace_default(launched: Launched) -> None:
    done, hub = launched.done("org-default"), launched.hubs["xet-client"]
    assert done.returncode == 0, done.stderr
    assert hub.files("evo-org/runs") == local_files(launched.output("org-default"))
    assert hub.repo("evo-org/runs").private


def test_push_to_a_branch(launched: Launched) -> None:
    done, hub = launched.done("dev"), launched.hubs["xet-client"]
    assert done.returncode == 0, done.stderr
    repo = hub.repo("evo-user/branch-runs")
    assert sorted(repo.refs) == ["dev", "main"]
    assert repo.files("main") == STALE  # untouched
    # On the branch: the stale shard deleted, the card replaced.
    assert repo.files("dev") == local_files(launched.output("dev"))
    assert [c.title for c in repo.history("dev")] == [
        "evopolicy export: rl, sft",
        "an older export",
        "initial commit",
    ]
    assert (
        f"pushed: {hub.endpoint}/datasets/evo-user/branch-runs/commit/{repo.refs['dev']}"
        in done.stdout
    )
    assert "POST /api/{type}s/{repo}/branch/{branch}" in hub.routes_used()
    assert_honest(hub)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_push_as_a_pull_request(launched: Launched, transport: str) -> None:
    done, hub = launched.done(f"{transport}/pr"), launched.hubs[transport]
    assert done.returncode == 0, done.stderr
    repo = hub.repo("evo-user/pr-runs")
    assert sorted(repo.refs) == ["main", "refs/pr/1"]
    assert repo.pulls[1].base == "main"
    assert repo.files("main") == STALE  # untouched
    assert repo.files("refs/pr/1") == local_files(launched.output(f"{transport}/pr"))
    assert [c.title for c in repo.history("refs/pr/1")][1:] == ["an older export", "initial commit"]
    assert (
        json.loads(done.stdout)["pushed"]
        == f"{hub.endpoint}/datasets/evo-user/pr-runs/discussions/1"
    )
    assert_honest(hub)


def test_second_push_replaces_the_configs_shards(launched: Launched) -> None:
    first, hub, repo_id = launched.done("replace/first"), launched.hubs["replace"], "evo-user/runs"
    assert first.returncode == 0, first.stderr
    output = launched.output("replace/first")
    before = local_files(output)
    assert hub.files(repo_id) == before
    others = {"notes.md": b"kept\n", "sft/NOTES.txt": b"not a shard: kept\n"}
    hub.commit_files(repo_id, others, message="someone's notes")

    # More Runs, smaller shards, into the same directory: sft train gets several shards, all
    # names change.
    store = write_runs(launched.work / "growing-store", range(4, 84), noise=1500)
    push = ["--max-shard-size", "64KiB", "--push-to-hub", repo_id]
    launched.start("replace/second", store, push, endpoint=hub.endpoint, output=output)
    second = launched.done("replace/second")
    assert second.returncode == 0, second.stderr
    after = local_files(output)
    assert_export_layout(after)
    assert len([p for p in after if p.startswith("sft/train-")]) >= 2
    assert not {p for p in before if p.endswith(".parquet")} & after.keys()

    repo = hub.repo(repo_id)
    assert not repo.private
    assert repo.files("main") == after | others  # no stale shard left; card and manifest replaced
    assert [c.title for c in repo.history("main")] == [
        "evopolicy export: rl, sft",  # one commit: deletions and additions together
        "someone's notes",
        "evopolicy export: rl, sft",
        "initial commit",
    ]
    assert_honest(hub)


# ---------------------------------------------------------------------------- failures


def test_wrong_token_fails_in_one_line_and_keeps_the_export(launched: Launched) -> None:
    done, hub = launched.done("wrong-token"), launched.hubs["failures"]
    assert done.returncode == 1
    line = one_error_line(done)
    assert "401" in line and "evo-user/denied" in line
    assert WRONG_TOKEN not in done.stderr + done.stdout
    assert_complete(launched.output("wrong-token"))
    assert ("dataset", "evo-user/denied") not in hub.repos
    assert_honest(hub)


def test_private_without_push_to_hub_is_a_usage_error(launched: Launched) -> None:
    done = launched.done("private-alone")
    assert done.returncode == 2
    assert "--private" in one_error_line(done)
    assert not launched.output("private-alone").exists()


def test_unreachable_hub_fails_in_one_line(launched: Launched) -> None:
    done = launched.done("unreachable")
    assert_complete(launched.output("unreachable"))
    assert done.returncode == 1
    assert "evo-user/offline" in one_error_line(done)


def test_revision_with_create_pr_fails_in_one_line(launched: Launched) -> None:
    done = launched.done("revision-and-pr")
    assert done.returncode in (1, 2)
    one_error_line(done)
