"""The Run page of `evopolicy view` (``/runs/{run}``), driven in-process: its values for a
recorded Run, how a Run is named (id, prefix, ``latest``), a Run's hostile text shown as
text, a Run recorded between two requests (only its new events folded), the figures' data,
and no Host-private value anywhere in the page."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.support.viewer import require_view

require_view()

from evopolicygym.records.events import (  # noqa: E402
    AgentExited,
    AgentMessages,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    NewEvent,
    SubmissionRejected,
    new_event,
)
from evopolicygym.records.location import Store, open_store  # noqa: E402
from evopolicygym.transcript import AgentIdentity, Message  # noqa: E402
from evopolicygym.view import run_reader  # noqa: E402
from tests.support.runlogs import (  # noqa: E402
    CANARY,
    CANARY_SEEDS,
    standard_run,
    synth_run,
    write_run,
)
from tests.support.viewer import view_client  # noqa: E402

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with open_store(path, create=True) as store:
        write_run(store, standard_run("alpha"))
        write_run(store, synth_run("alpine"))
    return path


@pytest.fixture
def client(store_dir: Path, tmp_path: Path) -> Iterator[Any]:
    with view_client(store_dir, tmp_path / "cache") as found:
        yield found
    found.store.close()


def _row(page: str, submission_id: int) -> str:
    """The Submissions table's row of ``submission_id``."""
    found = re.search(
        rf'<tr class="submission [^"]*" id="submission-{submission_id}">(.*?)</tr>', page, re.S
    )
    assert found is not None, f"no row of submission {submission_id}"
    return found.group(1)


def _cells(row: str) -> list[str]:
    return [
        html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]


def _specs(page: str) -> dict[str, Any]:
    return {
        key: json.loads(html.unescape(spec))
        for key, spec in re.findall(r"id=\"figure-(\w+)\" data-spec='([^']*)'", page)
    }


def _private_values() -> list[str]:
    """Every Host-private value a synthetic Run records (seeds, pool seeds, the Run seed)."""
    pool = CANARY_SEEDS["pool"]
    seeds = [*CANARY_SEEDS.values(), pool - 1]
    seeds += [pool * 10 + i for i in range(8)] + [pool * 10 + 100 + i for i in range(8)]
    return [CANARY, *map(str, seeds)]


# --------------------------------------------------------------------------- values


def test_page_shows_a_finished_runs_values(client: Any) -> None:
    response = client.get("/runs/alpha")
    assert response.status_code == 200
    page = response.text
    assert '<code class="run-id">alpha</code>' in page
    assert '<span class="badge finished">finished</span>' in page
    assert '<span class="badge success">success</span>' in page
    assert "improved: yes" in page and "handoff: agent" in page
    assert "toy-counter" in page
    for sid in range(1, 6):
        assert f'href="/runs/alpha/submissions/{sid}"' in page
    # Submission, parent, edit, beats, Episodes, status, score, failures, budget, validation
    assert _cells(_row(page, 1))[4:8] == ["3", "published", "2", "0"]
    two = _cells(_row(page, 2))
    assert two[0].startswith("#2") and "final" in two[0] and "candidate" in two[0]
    assert two[1] == "#1 (nearest)" and two[3] == "yes"
    assert two[6] == "5" and two[9] == "1.5"
    assert "best" in _cells(_row(page, 3))[0] and _cells(_row(page, 3))[6] == "9"
    four = _cells(_row(page, 4))
    assert four[5] == "failed"
    assert four[10] == "worker lost on seed <private> (<private>)"  # scrubbed, then escaped
    assert "12 / 8 Episodes used" in page
    assert "5 started, 4 published, 1 failed" in page
    assert 'validation <span class="num">1.5</span>' in page
    assert "<dt>Assessment (held out)</dt><dd>42" in page
    assert 'href="/compare?a=alpha"' in page
    assert 'href="/runs/alpha/events"' in page
    assert 'href="/runs/alpha/conversation?attempt=1"' in page
    assert 'data-live-run="alpha"' in page


def test_page_shows_validation_assessment_and_the_agent(client: Any) -> None:
    page = client.get("/runs/alpha").text
    checks = page[page.index('id="run-checks"') : page.index('id="run-agent"')]
    assert "initial program" in checks and "reference" in checks
    assert '<a href="/runs/alpha/submissions/3">#3</a>' in checks
    assert '<td class="num">42</td>' in checks
    assert "error x2" in checks  # the held-out Episodes' statuses, never their failure text
    agent = page[page.index('id="run-agent"') : page.index('id="run-timeline"')]
    cells = _cells(re.search(r'<tr id="attempt-1">(.*?)</tr>', agent, re.S).group(1))  # type: ignore[union-attr]
    assert cells[2] == "exited, code 0"
    assert cells[3:5] == ["30", "12"]  # messages, tool calls
    assert cells[5] == "1,200 (0 cached)" and cells[6] == "240 (0 reasoning)"
    assert cells[7] == "read_file, write_file, bash"
    timeline = page[page.index('id="run-timeline"') :]
    assert "the last 20 of 22" in timeline
    assert "run finished: finished" in timeline
    assert "Run config (public)" in page and "episode_budget" in page


def test_no_private_value_reaches_the_page(client: Any) -> None:
    for run in ("alpha", "alpine"):
        page = client.get(f"/runs/{run}").text
        for value in _private_values():
            assert value not in page, (run, value)


# --------------------------------------------------------------------------- naming a Run


def test_a_run_is_named_by_prefix_or_latest(client: Any) -> None:
    assert '<code class="run-id">alpine</code>' in client.get("/runs/alpi").text
    assert '<code class="run-id">alpine</code>' in client.get("/runs/latest").text
    assert '<code class="run-id">alpha</code>' in client.get("/runs/alpha").text
    assert '<code class="run-id">alpha</code>' in client.get("/runs/run-alpha").text


def test_an_unknown_or_ambiguous_run_is_not_found(client: Any) -> None:
    unknown = client.get("/runs/nope")
    assert unknown.status_code == 404
    assert unknown.text == "no run 'nope' in the store"
    ambiguous = client.get("/runs/alp")
    assert ambiguous.status_code == 404
    assert "alpha, alpine" in ambiguous.text
    assert client.get("/runs/alpha?page=x").status_code == 400


# --------------------------------------------------------------------------- hostile text


def _append(store: Store, run_id: str, events: list[Event]) -> None:
    stream = f"run-{run_id}"
    version = next(i.version for i in store.events.streams(stream) if i.stream_id == stream)
    batch = [new_event(e, f"{stream}/extra-{version + i}") for i, e in enumerate(events, start=1)]
    store.events.append(stream, batch, version)


def test_hostile_text_is_shown_as_text(tmp_path: Path) -> None:
    hostile = f"{SCRIPT} {IMG}"
    agent = AgentIdentity(name=SCRIPT, provider="reference", model=IMG)
    with open_store(tmp_path / "store", create=True) as store:
        write_run(store, standard_run("evil", agent=agent))
        # The sixth Submission, whose evaluation fails, reuses the first's Program.
        first = next(
            e.event() for e in store.events.read_stream("run-evil") if e.type == "EvaluationStarted"
        )
        assert isinstance(first, EvaluationStarted)
        _append(
            store,
            "evil",
            [
                AgentMessages(
                    attempt=2, chunk=0, messages=[Message(role="error", content=hostile)]
                ),
                SubmissionRejected(
                    request_id="r1", code="invalid_request", message=hostile, selector=IMG
                ),
                EvaluationStarted(
                    submission_id=6,
                    program_digest=first.program_digest,
                    indices=[6],
                    budget_reserved=1,
                    budget_used=13,
                ),
                EvaluationFailed(submission_id=6, error=hostile, budget_consumed=1),
                AgentExited(attempt=2, exit_code=1, reason=hostile, errors=1, last_error=hostile),
            ],
        )
    with view_client(tmp_path / "store", tmp_path / "cache") as client:
        response = client.get("/runs/evil")
        client.store.close()
    assert response.status_code == 200
    page = response.text
    assert SCRIPT not in page and IMG not in page
    assert "<img" not in page and "<script" not in page.replace('<script src="/static/', "")
    escaped_script = "&lt;script&gt;alert(1)&lt;/script&gt;"
    escaped_img = "&lt;img src=x onerror=alert(1)&gt;"
    for where in ("run-facts", "run-submissions", "run-agent", "run-timeline"):
        part = page[page.index(f'id="{where}"') :]
        part = part[: part.index("</section>")]
        assert escaped_script in part, where
        assert escaped_img in part, where
    assert _cells(_row(page, 6))[10] == hostile
    for spec in _specs(page).values():  # a label plotly would read as markup stays text
        assert SCRIPT not in json.dumps(spec) and IMG not in json.dumps(spec)


# --------------------------------------------------------------------------- a Run recorded


class _Capture:
    """A store whose log keeps the batch ``write_run`` appends instead of appending it."""

    def __init__(self, store: Store) -> None:
        self.blobs = store.blobs
        self.events = self
        self.batch: list[NewEvent] = []

    def append(self, stream_id: str, events: list[NewEvent], expected_version: int) -> list[int]:
        self.batch = list(events)
        return []


def test_a_run_recorded_between_two_requests_shows_its_new_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    with open_store(path, create=True) as store:
        capture = _Capture(store)
        write_run(cast(Store, capture), standard_run("live"))
        batch = capture.batch
        starts = [i for i, e in enumerate(batch) if e.type == "EvaluationStarted"]
        published = [i for i, e in enumerate(batch) if e.type == "SubmissionPublished"]
        first, second = batch[: starts[1] - 1], batch[starts[1] - 1 : published[1] + 1]
        store.events.append("run-live", first, 0)
    folds: list[tuple[int, int]] = []  # (the version a fold started at, events it folded)
    catch_up = run_reader.RunReader.catch_up

    def counted(self: run_reader.RunReader) -> int:
        start = self.version
        folded = catch_up(self)
        folds.append((start, folded))
        return folded

    monkeypatch.setattr(run_reader.RunReader, "catch_up", counted)
    with view_client(path, tmp_path / "cache") as client:
        before = client.get("/runs/live").text
        with open_store(path) as writer:  # another process recording the Run
            writer.events.append("run-live", second, len(first))
        after = client.get("/runs/live").text
        client.store.close()
    assert '<span class="badge running">running</span>' in before
    assert 'id="submission-1"' in before and 'id="submission-2"' not in before
    assert 'id="submission-2"' in after
    assert _cells(_row(after, 2))[5:7] == ["published", "5"]
    assert "2 started, 2 published, 0 failed" in after
    # The second request folded the new events only, from the version the first reached.
    assert folds == [(0, len(first)), (len(first), len(second))]


def test_a_page_shows_before_a_slow_lineage_and_reloads_for_it(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    lineage_of = run_reader.lineage_of

    def slow(store: Store, run_id: str) -> Any:
        release.wait(30)
        return lineage_of(store, run_id)

    monkeypatch.setattr(run_reader, "lineage_of", slow)
    monkeypatch.setattr("evopolicygym.view.run_page.LINEAGE_WAIT_S", 0.0)
    with view_client(store_dir, tmp_path / "cache") as client:
        first = client.get("/runs/alpha").text
        release.set()
        later = first
        for _ in range(300):  # until the lineage's thread is done
            later = client.get("/runs/alpha").text
            if "lineage-pending" not in later:
                break
            time.sleep(0.05)
        client.store.close()
    assert 'http-equiv="refresh"' in first and "lineage-pending" in first
    assert 'id="figure-tree"' in first and 'id="figure-best"' not in first
    assert _cells(_row(first, 2))[1] == "-"  # no parent known yet
    assert 'http-equiv="refresh"' not in later
    assert _cells(_row(later, 2))[1] == "#1 (nearest)"
    assert 'id="figure-best"' in later


# --------------------------------------------------------------------------- figures


def test_figures_are_json_in_data_spec_attributes(client: Any) -> None:
    page = client.get("/runs/alpha").text
    specs = _specs(page)
    assert set(specs) == {"tree", "best", "budget", "scores"}
    for spec in specs.values():
        assert isinstance(spec["data"], list) and spec["data"]
        assert "layout" in spec
    budget = specs["budget"]["data"][0]
    assert budget["x"] == [0, 1, 2, 3, 4, 5] and budget["y"] == [0, 3, 6, 8, 9, 12]
    assert '<script src="/static/plotly.min.js" defer></script>' in page
