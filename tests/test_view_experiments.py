"""The viewer's experiment pages and its comparison of two Runs, driven in-process.

One store of recorded Runs (tests/support/runlogs.py) and an experiment stream ``demo`` over
some of them: three agents on two Benchmark labels, one cell retried, one cell with no Run
yet. Its leaderboard is checked against ``evopolicy experiment summary --json`` over the same
store; the comparison against the Runs' own facts, and against a Run whose program carries
markup and a credential.
"""

from __future__ import annotations

from tests.support.viewer import require_view

require_view()

import html  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from html.parser import HTMLParser  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from evopolicygym.records.location import open_store  # noqa: E402
from evopolicygym.report.html import fmt  # noqa: E402
from tests.support.cli import invoke  # noqa: E402
from tests.support.runlogs import (  # noqa: E402
    Planned,
    policy_source,
    synth_run,
    write_experiment,
    write_run,
)
from tests.support.viewer import view_client  # noqa: E402

HOSTILE = "# <img src=x onerror=alert(1)>"
TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"  # a GitHub token's shape
HTML = {"accept": "text/html"}


# --------------------------------------------------------------------------- the store


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-experiments") / "store"
    with open_store(root, create=True) as opened:
        for run_id, score in [
            ("a1", 42.0),
            ("a2", 40.0),
            ("b2-first", 99.0),
            ("b2", 35.0),
            ("c1", 50.0),
            ("d1", 30.0),
            ("d2", 20.0),
        ]:
            write_run(opened, synth_run(run_id, assessment_score=score))
        # Its final Program does not beat the initial one's Validation score: no success.
        write_run(opened, synth_run("b1", assessment_score=30.0, reference_score=2.0))
        write_experiment(
            opened,
            [
                ("ref", "toy", 0, 0, [("a1", "finished")]),
                ("ref", "toy", 1, 0, [("a2", "finished")]),
                ("alt", "toy", 0, 0, [("b1", "finished")]),
                ("alt", "toy", 1, 0, [("b2-first", "agent_failed"), ("b2", "finished")]),
                ("base", "toy", 0, 0, [("c1", "finished")]),
                ("ref", "toy2", 0, 0, [("d1", "finished")]),
                ("alt", "toy2", 0, 0, [("d2", "finished")]),
                ("base", "toy2", 0, 0, []),  # no Run yet
            ],
        )
        # For the comparison: finals #2 (gain 0.7) and #3 (gain 0.9).
        write_run(opened, synth_run("cmp-a", assessment_score=42.0))
        other = synth_run("cmp-b", assessment_score=17.5)
        other.candidates = [3]
        write_run(opened, other)
        evil = synth_run("evil", assessment_score=7.0)
        evil.candidates = [3]
        evil.submissions[2] = Planned(
            {"policy.py": policy_source(0.9) + f"{HOSTILE}\nKEY = '{TOKEN}'\n"}, [3, 4], [9.0, 9.0]
        )
        write_run(opened, evil)
        write_run(opened, synth_run("elsewhere", benchmark_id="toy-other"))
    return root


@pytest.fixture(scope="module")
def client(store_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with view_client(store_dir, tmp_path_factory.mktemp("view-cache")) as opened:
        yield opened
    opened.store.close()


def get(client: Any, url: str, status: int = 200) -> str:
    response = client.get(url, headers=HTML)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    text: str = response.text
    return text


# --------------------------------------------------------------------------- reading pages


class _Tables(HTMLParser):
    """Each table's rows as lists of cell texts, by the table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str, cls: str) -> list[list[list[str]]]:
    """The tables of ``page`` of class ``cls``: each its rows (header first) of cell texts."""
    parser = _Tables()
    parser.feed(page)
    return [rows for found, rows in parser.tables if cls in found.split()]


def spec(page: str, figure_id: str) -> dict[str, Any]:
    found = re.search(rf"id=\"{figure_id}\" data-spec='([^']*)'", page)
    assert found is not None, f"no figure {figure_id}"
    parsed: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return parsed


@pytest.fixture(scope="module")
def summary(store_dir: Path) -> dict[str, Any]:
    """What ``evopolicy experiment summary demo --json`` prints for the same store."""
    result = invoke("experiment", "summary", "demo", "--store", str(store_dir), "--json")
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


# --------------------------------------------------------------------------- experiments


def test_the_list_shows_each_experiment_with_its_cells_and_runs(client: Any) -> None:
    page = get(client, "/experiments")
    assert 'href="/experiments/demo"' in page
    [rows] = tables(page, "experiments")
    header, row = rows[0], rows[1]
    cells = dict(zip(header, row, strict=True))
    assert cells["experiment"] == "demo" and cells["profile"].startswith("quick")
    assert cells["agents"] == "alt, base, ref"
    assert (cells["cells"], cells["Runs"], cells["ended"], cells["running"]) == ("8", "8", "7", "0")
    assert (cells["waiting"], cells["faults"]) == ("1", "0")


def test_the_leaderboard_ranks_as_experiment_summary_does(
    client: Any, summary: dict[str, Any]
) -> None:
    page = get(client, "/experiments/demo")
    [rows] = tables(page, "leaderboard")
    header, body = rows[0], rows[1:]
    benchmarks = header[4:]
    assert benchmarks == ["toy", "toy2"]
    shown = [(r[1], r[2], [cell.split(" · ")[0] for cell in r[4:]]) for r in body]
    expected = [
        (r["agent"], fmt(r["rank_score"]), [str(r["ranks"][b]) for b in benchmarks])
        for r in summary["leaderboard"]
    ]
    assert shown == expected
    # The values themselves: ref first on toy2 and second on toy, base first on toy only.
    assert [(agent, score) for agent, score, _ in shown] == [
        ("ref", "0.75"),
        ("base", "0.5"),
        ("alt", "0.25"),
    ]
    assert "41 ± 1.414 [28.29, 53.71] n=2/2" in body[0][4]


def test_each_benchmark_has_a_table_of_scores_and_success(
    client: Any, summary: dict[str, Any]
) -> None:
    page = get(client, "/experiments/demo")
    toy, toy2 = tables(page, "per-benchmark")
    by_agent = {row[1]: dict(zip(toy[0], row, strict=True)) for row in toy[1:]}
    assert [row[1] for row in toy[1:]] == ["base", "ref", "alt"]  # by rank
    ref = by_agent["ref"]
    assert (ref["rank"], ref["Runs"], ref["scored"], ref["mean"], ref["SD"]) == (
        "2",
        "2",
        "2",
        "41",
        "1.414",
    )
    assert (ref["95% low"], ref["95% high"]) == ("28.29", "53.71")
    # b1's final Program did not beat its initial one: one success of alt's two Runs.
    assert by_agent["alt"]["success"] == "50% (1/2)" and ref["success"] == "100% (2/2)"
    assert by_agent["alt"]["mean"] == "32.5"  # b2 stands for its cell, not b2-first (99)
    scores = {(r["agent"], r["benchmark"]): r for r in summary["scores"]}
    assert by_agent["base"]["mean"] == fmt(scores[("base", "toy")]["mean"])
    # base has no Run on toy2: it ranks last there, with no score.
    last = dict(zip(toy2[0], toy2[-1], strict=True))
    assert (last["agent"], last["rank"], last["Runs"], last["mean"]) == ("base", "3", "0", "-")


def test_cells_link_their_runs_and_show_retries_and_waiting(client: Any) -> None:
    page = get(client, "/experiments/demo")
    for run_id in ("a1", "a2", "b1", "b2", "b2-first", "c1", "d1", "d2"):
        assert f'href="/runs/{run_id}"' in page
    [rows] = tables(page, "cells")
    texts = [" | ".join(row) for row in rows[1:]]
    assert any("b2-first | 1 (retried) | agent_failed" in t for t in texts), texts
    assert any(t.startswith("base | toy2 | 0 | 0 | waiting") for t in texts), texts
    assert any("a1 | 1 | finished | finished success | 1.5 | 42" in t for t in texts), texts


def test_the_experiment_figures_are_json_specs_and_the_tables_follow_the_store(
    client: Any,
) -> None:
    page = get(client, "/experiments/demo")
    board = spec(page, "plot-leaderboard")
    assert {trace["name"] for trace in board["data"]} == {"alt", "base", "ref"}
    assert spec(page, "plot-best-0")["data"]
    for key in ("leaderboard", "benchmark-tables", "experiment-cells", "experiment-figures"):
        assert f'data-live="{key}"' in page


def test_an_unknown_experiment_is_a_404_saying_so(client: Any) -> None:
    page = get(client, "/experiments/nope", status=404)
    assert "no experiment &#39;nope&#39; in this store" in page


def test_an_experiment_page_follows_runs_recorded_after_it_was_shown(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as opened:
        write_experiment(opened, [("ref", "toy", 0, 0, [("late", "finished")])])
    with view_client(root, tmp_path / "cache") as fresh:
        before = get(fresh, "/experiments/demo")
        with open_store(root) as writer:  # another process records the cell's Run
            write_run(writer, synth_run("late", assessment_score=12.5))
        after = get(fresh, "/experiments/demo")
        fresh.store.close()
    assert "No Run of this experiment is recorded yet." in before
    assert 'late <span class="muted">(not recorded)</span>' in before
    assert 'href="/runs/late"' in after and "(not recorded)" not in after
    [rows] = tables(after, "leaderboard")
    assert rows[1][1:3] == ["ref", "1"] and rows[1][4].startswith("1 · 12.5 n=1/1")


# --------------------------------------------------------------------------- compare


def test_two_runs_side_by_side(client: Any) -> None:
    page = get(client, "/compare?a=cmp-a&b=cmp-b")
    [facts] = tables(page, "facts-table")
    header = facts[0]
    assert header[1:] == ["a: cmp-a", "b: cmp-b"]
    rows = {row[0]: row[1:] for row in facts[1:]}
    assert rows["assessment score"] == ["42", "17.5"]
    assert rows["final Submission"] == ["#2", "#3"]
    assert rows["final (validation) score"] == ["1.5", "1.5"]
    assert rows["Benchmark"] == ["toy-counter", "toy-counter"]
    assert rows["budget used"] == ["14/8", "14/8"]
    assert rows["status"] == ["finished", "finished"]
    assert "not comparable" not in page
    # The final programs diffed, line by line, as text.
    assert '<span class="del">-    gain = 0.7</span>' in page
    assert '<span class="add">+    gain = 0.9</span>' in page
    figure = spec(page, "plot-compare")
    assert [trace["name"] for trace in figure["data"]] == ["a: cmp-a", "b: cmp-b"]
    assert all(trace["line"]["shape"] == "hv" for trace in figure["data"])


def test_a_hostile_program_line_is_shown_as_text_and_credentials_redacted(client: Any) -> None:
    page = get(client, "/compare?a=cmp-a&b=evil")
    assert "+# &lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert TOKEN not in page and "[REDACTED]" in page


def test_runs_of_different_benchmarks_are_compared_with_a_warning(client: Any) -> None:
    page = get(client, "/compare?a=cmp-a&b=elsewhere")
    assert "their scores are not comparable" in page
    assert "toy-counter" in page and "toy-other" in page


def test_with_only_a_a_form_offers_runs_of_its_benchmark(client: Any) -> None:
    page = get(client, "/compare?a=cmp-a")
    offered = re.findall(r'<option value="([^"]+)">', page)
    assert offered and "cmp-a" not in offered and "elsewhere" not in offered
    assert {"cmp-b", "evil", "a1"} <= set(offered)
    assert 'name="a" value="cmp-a"' in page


def test_with_neither_a_form_takes_two_ids(client: Any) -> None:
    page = get(client, "/compare")
    assert re.search(r'<input type="text" name="a"', page)
    assert re.search(r'<input type="text" name="b"', page)


@pytest.mark.parametrize("query", ["a=nope&b=cmp-a", "a=cmp-a&b=nope", "a=nope"])
def test_an_unknown_run_is_a_404_naming_it(client: Any, query: str) -> None:
    page = get(client, f"/compare?{query}", status=404)
    assert "no run &#39;nope&#39; in the store" in page
