"""The training environment on a PostgreSQL store: rollouts of several instances at once
are Runs that verify, as on SQLite."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicygym.records import open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run import load_run
from evopolicygym.training import PolicyEvolutionEnv
from tests.support import pg
from tests.support.training import cartpole_row


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    pg.require_postgres()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        yield pg.url_of(pg.database_for(tmp_path))
    finally:
        pg.drop_made()


def test_rollouts_on_postgres_are_runs_that_verify(url: str) -> None:
    envs = [
        PolicyEvolutionEnv(store=url, validation_episodes=2, assessment_episodes=2, jobs=1)
        for _ in range(2)
    ]
    rewards: list[float] = []

    def rollout(env: PolicyEvolutionEnv) -> None:
        env.reset(**cartpole_row())
        env.submit("0:2")
        env.finish([1])
        rewards.append(env.get_reward())

    threads = [threading.Thread(target=rollout, args=(env,)) for env in envs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert rewards == [0.0, 0.0]  # the initial program, submitted unchanged: A == I
    with open_store(url) as store:
        report = verify_store(store)
        assert report.ok and report.events > 20, report.problems
        streams = [info.stream_id for info in store.events.streams("run-")]
        states = [load_run(store, s.removeprefix("run-"))[0] for s in streams]
    assert [s.finished for s in states] == ["finished", "finished"]
