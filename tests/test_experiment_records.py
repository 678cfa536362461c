"""The experiment stream in a store: its read API, and every reader of Runs unchanged by it.

A real Run (the reference Agent on cartpole) is recorded; a copy of the store gets an
experiment stream naming it (and a cell assigned to a Run not created yet, as a crash
between the two appends leaves it). ``record list``, ``record verify``, ``query``,
``export`` and ``record replay`` must say the same of the Runs in both stores.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.records.events import (
    CellRunAssigned,
    CellRunEnded,
    ExperimentAgent,
    ExperimentBenchmark,
    ExperimentCell,
    ExperimentCreated,
    new_event,
)
from evopolicygym.records.experiments import (
    UnknownExperiment,
    cell_config,
    experiment_ids,
    experiment_runs,
    experiment_stream_id,
    read_experiment,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.verify import verify_store


def invoke(*args: str) -> Result:
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    return CliRunner(**options).invoke(main, list(args), catch_exceptions=False)


def created(run_config: dict[str, Any]) -> ExperimentCreated:
    cells = [
        ExperimentCell(
            cell_id="ref/cartpole/seed=0/agent_seed=0", agent="ref", benchmark="cartpole", seed=0
        ),
        ExperimentCell(
            cell_id="ref/cartpole/seed=1/agent_seed=0", agent="ref", benchmark="cartpole", seed=1
        ),
    ]
    return ExperimentCreated(
        experiment_id="demo",
        spec_digest="0" * 64,
        profile="quick",
        config=run_config,
        agents=[ExperimentAgent(name="ref", provider="reference", options={})],
        benchmarks=[ExperimentBenchmark(name="cartpole", id="cartpole", params={})],
        cells=cells,
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(a store with one real Run, a copy of it with an experiment stream, the Run id)."""
    root = tmp_path_factory.mktemp("experiment-records")
    plain = root / "plain"
    out = subprocess.run(
        [
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
            "--assessment-episodes",
            "2",
            "--jobs",
            "1",
            "--allow-uncontained-agent",
            "--store",
            str(plain),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    run_id = json.loads(out.stdout)["run_id"]
    with_experiment = root / "with-experiment"
    shutil.copytree(plain, with_experiment)
    with open_store(with_experiment) as store:
        [run_created] = [e.event() for e in store.events.read_stream(f"run-{run_id}", 0)][:1]
        config = dict(run_created.config)  # type: ignore[attr-defined]
        stream = experiment_stream_id("demo")
        store.events.append(stream, [new_event(created(config), "demo/created")], 0)
        store.events.append(
            stream,
            [
                new_event(
                    CellRunAssigned(
                        cell_id="ref/cartpole/seed=0/agent_seed=0", run_id=run_id, attempt=1
                    ),
                    "demo/a1",
                ),
                new_event(
                    CellRunEnded(
                        cell_id="ref/cartpole/seed=0/agent_seed=0",
                        run_id=run_id,
                        attempt=1,
                        outcome="finished",
                        retryable=False,
                    ),
                    "demo/e1",
                ),
                # A Run assigned but never created (the runner died between the two appends).
                new_event(
                    CellRunAssigned(
                        cell_id="ref/cartpole/seed=1/agent_seed=0", run_id="never-made", attempt=1
                    ),
                    "demo/a2",
                ),
            ],
            1,
        )
    return plain, with_experiment, run_id


def test_the_read_api(stores: tuple[Path, Path, str]) -> None:
    plain, with_experiment, run_id = stores
    with open_store(with_experiment) as store:
        assert experiment_ids(store.events) == ["demo"]
        runs = experiment_runs(store.events, "demo")
        assert [(r.cell_id, r.run_id, r.attempt, r.current, r.outcome) for r in runs] == [
            ("ref/cartpole/seed=0/agent_seed=0", run_id, 1, True, "finished"),
            ("ref/cartpole/seed=1/agent_seed=0", "never-made", 1, True, None),
        ]
        assert runs[0].benchmark_id == "cartpole" and runs[0].provider == "reference"
        assert experiment_runs(store.events, "experiment-demo") == runs  # the stream id works too
        record = read_experiment(store.events, "demo")
        assert record.version == 4
        assert record.created is not None
        assert cell_config(record.created, record.created.cells[1])["seed"] == 1
        with pytest.raises(UnknownExperiment, match="no experiment 'other'"):
            experiment_runs(store.events, "other")

    with open_store(plain) as store:
        assert experiment_ids(store.events) == []


def test_an_experiment_named_like_a_stream_id(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        plain = created({})
        named = msgspec.structs.replace(plain, experiment_id="experiment-demo")
        store.events.append("experiment-demo", [new_event(plain, "plain/created")], 0)
        store.events.append("experiment-experiment-demo", [new_event(named, "named/created")], 0)
        assert experiment_ids(store.events) == ["demo", "experiment-demo"]
        # The name as given first, then as a stream id.
        assert read_experiment(store.events, "experiment-demo").experiment_id == "experiment-demo"
        assert read_experiment(store.events, "demo").experiment_id == "demo"
        assert (
            read_experiment(store.events, "experiment-experiment-demo").experiment_id
            == "experiment-demo"
        )


def test_record_list_and_verify_see_only_the_runs(stores: tuple[Path, Path, str]) -> None:
    plain, with_experiment, run_id = stores
    listed = [
        json.loads(invoke("record", "list", "--store", str(s), "--json").stdout)
        for s in (plain, with_experiment)
    ]
    assert listed[0] == listed[1]
    assert [row["run_id"] for row in listed[1]] == [run_id]
    for store_dir in (plain, with_experiment):
        result = invoke("record", "verify", "--store", str(store_dir))
        assert result.exit_code == 0, result.stderr
        with open_store(store_dir) as store:
            assert verify_store(store).ok


def test_query_reads_runs_alike_and_lists_experiment_events(stores: tuple[Path, Path, str]) -> None:
    plain, with_experiment, _ = stores
    sql = "SELECT * EXCLUDE (updated_at) FROM runs"
    rows = [
        json.loads(invoke("query", sql, "--store", str(s), "--json").stdout)
        for s in (plain, with_experiment)
    ]
    assert rows[0] == rows[1] and len(rows[1]) == 1
    for table in ("submissions", "episodes"):
        counts = [
            json.loads(
                invoke(
                    "query", f"SELECT count(*) AS n FROM {table}", "--store", str(s), "--json"
                ).stdout
            )
            for s in (plain, with_experiment)
        ]
        assert counts[0] == counts[1]
    events = json.loads(
        invoke(
            "query",
            "SELECT type, run_id FROM events WHERE stream_id LIKE 'experiment-%' ORDER BY position",
            "--store",
            str(with_experiment),
            "--json",
        ).stdout
    )
    assert [(e["type"], e["run_id"]) for e in events] == [
        ("ExperimentCreated", None),
        ("CellRunAssigned", None),
        ("CellRunEnded", None),
        ("CellRunAssigned", None),
    ]


def test_export_and_replay_are_unchanged(stores: tuple[Path, Path, str], tmp_path: Path) -> None:
    plain, with_experiment, run_id = stores
    manifests = []
    for i, store_dir in enumerate((plain, with_experiment)):
        out = tmp_path / f"out{i}"
        result = invoke(
            "export",
            "--format",
            "sft,programs,events",
            "-o",
            str(out),
            "--store",
            str(store_dir),
            "--json",
        )
        assert result.exit_code == 0, result.stderr
        manifest = json.loads(result.stdout)
        manifests.append({k: v for k, v in manifest.items() if k in ("configs", "runs", "skipped")})
    assert manifests[0] == manifests[1] and manifests[1]["runs"] == 1
    replays = [
        invoke("record", "replay", run_id, "--store", str(s), "--json")
        for s in (plain, with_experiment)
    ]
    assert all(r.exit_code == 0 for r in replays), [r.stderr for r in replays]
    assert json.loads(replays[0].stdout) == json.loads(replays[1].stdout)
