"""The HTML report of a Run, read as text: self-contained, escaped, redacted, and telling
the Run's facts as the Run read API does. (tests/test_report_browser.py opens it in a
browser.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import run_stream_id, summarize
from evopolicygym.redaction import Redactor
from evopolicygym.report import run_report
from tests.support.blobdamage import lose_program
from tests.support.runlogs import CANARY, CANARY_SEEDS, Planned, SynthRun, policy_source, write_run

CLI = [sys.executable, "-m", "evopolicygym.cli"]
SECRET = "sk-proj-Zx9Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # an OpenAI key, by its shape
HOSTILE = "</script><script>alert(1)</script><b>bold</b>"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def _run() -> SynthRun:
    """1 and 2 on the same indices, 3 on others (unmatched), 4 failed (its error quotes a
    pool seed and scenario), 5 names the initial program as its parent; a secret and markup
    in program text."""
    hostile = {"policy.py": f"# {HOSTILE}\n# key {SECRET}\n" + policy_source(0.7)}
    return SynthRun(
        run_id="alpha",
        submissions=[
            Planned({"policy.py": policy_source(0.5)}, [0, 1], [1.0, 2.0]),
            Planned(hostile, [0, 1], [4.0, 5.0]),
            Planned({"policy.py": policy_source(0.9)}, [3, 4], [9.0, 9.0]),
            Planned({"policy.py": policy_source(1.1)}, [5], None),
            Planned(
                {"policy.py": policy_source(0.5, structural=True)}, [0, 1], [0.5, 0.5], parent=0
            ),
        ],
        candidates=[2, 3],
    )


def _page(store: Store) -> str:
    write_run(store, _run())
    return run_report(store, run_stream_id("alpha"), redact=Redactor().text).html


def test_the_page_is_self_contained_with_plotly_inlined_once(store: Store) -> None:
    html = _page(store)
    assert html.startswith("<!DOCTYPE html>")
    # plotly.js once (its source carries its version banner), then one call per figure.
    assert html.count('<script type="text/javascript">') == 1
    assert len(re.findall(r"plotly\.js v\d", html)) == 1
    # Nothing else is fetched: no external script, style, image or font (the library's own
    # source names links it can draw, which fetch nothing).
    ours = re.sub(r'<script type="text/javascript">.*?</script>', "", html, count=1, flags=re.S)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", ours)
    assert "<link" not in ours and "@import" not in ours and "<script src" not in ours
    figures = re.findall(r'<div class="figure" data-figure="([\w-]+)">', html)
    assert figures == ["plot-timeline", "plot-submissions", "plot-best"]
    assert html.count("Plotly.newPlot(") == len(figures)


def test_recorded_text_is_escaped_redacted_and_scrubbed_of_private_values(store: Store) -> None:
    html = _page(store)
    assert HOSTILE not in html and "<script>alert(1)" not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html  # in the diff of #2
    assert SECRET not in html and "[REDACTED]" in html
    # Host-private: the pool's seeds and scenarios (quoted by #4's error), the Run's seed,
    # the Validation and Assessment seeds never reach the page.
    assert CANARY not in html
    pool_seed = str(CANARY_SEEDS["pool"] * 10 + 5)
    assert pool_seed not in html and "&lt;private&gt;" in html
    for seed in (*CANARY_SEEDS.values(), CANARY_SEEDS["pool"] - 1):
        assert str(seed) not in html


def test_the_page_tells_the_runs_facts(store: Store) -> None:
    html = _page(store)
    summary = summarize(store.events, run_stream_id("alpha"))
    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", html))
    assert facts["Benchmark"] == "toy-counter (maximize)"
    assert facts["Terminal reason"] == summary.terminal_reason == "finished"
    assert facts["Handoff"] == summary.handoff == "agent"
    assert facts["Improved"] == ("yes" if summary.improved else "no")
    assert facts["Budget"] == f"{summary.budget_used} of {summary.episode_budget} Episodes used"
    assert facts["Submissions"] == "5 evaluated, 4 published, 1 failed, 0 refused"
    assert facts["Best published (train)"] == f"#3: 9 ({summary.best_basis})" == "#3: 9 (unmatched)"
    # The diff viewer: one option and one pre-rendered diff per Submission, each against its
    # parent (5 names the initial program; 3 is nearer 1 than 2, which adds lines; 4 ties
    # 1 and 3 and takes the more recent).
    options = re.findall(r'<option value="(\d+)">#\d+ vs its parent (\S+) \((\w+)\)</option>', html)
    assert [(sid, parent) for sid, parent, _kind in options] == [
        ("1", "initial"),
        ("2", "#1"),
        ("3", "#1"),
        ("4", "#3"),
        ("5", "initial"),
    ]
    assert dict((sid, kind) for sid, _parent, kind in options)["5"] == "synthesis"
    assert re.findall(r'<pre class="diff" data-diff="(\d+)">', html) == ["1", "2", "3", "4", "5"]
    # Best so far: 3 scored on other Episodes than the best before it is labelled unmatched.
    best = re.search(r'"name":"Submission, unmatched \(other Episodes\)".*?"text":\[(.*?)\]', html)
    assert best is not None and "#3 (unmatched" in best.group(1)
    # Failures are marked: #4's failed evaluation is its own series.
    assert '"name":"evaluation failed","x":[4]' in html
    # The transcript: every message, tool calls with their arguments, results by call id.
    assert html.count('class="msg ') >= 10 and "→ <b>" in html and "result of call" in html
    # Validation and Assessment: scores only, and the selected candidate marked.
    assert "initial program (reference)" in html and '<b class="good">selected</b>' in html


def test_the_cli_writes_the_page_and_tells_where(store: Store, tmp_path: Path) -> None:
    write_run(store, _run())
    out = tmp_path / "report.html"
    done = subprocess.run(
        [*CLI, "report", "alpha", "-o", str(out), "--store", str(store.path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout)
    assert told == {"path": str(out), "bytes": out.stat().st_size, "runs": 1}
    assert "Run alpha" in out.read_text(encoding="utf-8")
    again = subprocess.run(
        [*CLI, "report", "run-alpha", "-o", str(out), "--store", str(store.path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0 and again.stdout.startswith(f"wrote {out} ("), again.stderr
    assert [
        p.name for p in tmp_path.iterdir() if p.name.startswith(".report.html")
    ] == []  # no temporary left


# --------------------------------------------------------------------------- many Runs


def test_the_page_of_many_runs_tells_the_diagnostics_and_no_recorded_text(store: Store) -> None:
    from evopolicygym.analysis import diagnostics, runs_df, submissions_df
    from evopolicygym.transcript import AgentIdentity

    chat = AgentIdentity(name="chat-x", provider="chat", model="m")
    for i in range(6):
        run = _run()
        run.run_id = f"r{i}"
        run.benchmark_id = ("toy-counter", "cartpole")[i % 2]
        run.assessment_score = 10.0 + i
        if i >= 4:
            run.agent = chat
        write_run(store, run)
    from evopolicygym.report import runs_report

    built = runs_report(store, title="six")
    html = built.html
    assert built.runs == 6
    ranks = diagnostics.rank_scores(diagnostics.score_table(runs_df(store)))
    board = re.search(
        r'id="leaderboard"><h2>Leaderboard</h2><table class=""><thead>.*?</thead>'
        r"<tbody>(.*?)</tbody>",
        html,
    )
    assert board is not None
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in board.group(1).split("</tr>") if row]
    assert [(c[0], float(c[1])) for c in cells] == list(
        zip(ranks["agent"], ranks["rank_score"], strict=True)
    )
    assert [c[0] for c in cells] == ["chat-x", "reference"]  # higher means on both Benchmarks
    figures = re.findall(r'<div class="figure" data-figure="([\w-]+)">', html)
    assert figures == [
        "plot-leaderboard",
        "plot-best-0",
        "plot-best-1",
        "plot-selection",
        "plot-edits",
    ]
    assert (
        html.count("Plotly.newPlot(") == len(figures)
        and len(re.findall(r"plotly\.js v\d", html)) == 1
    )
    # Edit kinds as the frames classify them.
    edits = diagnostics.edit_dynamics(runs_df(store), submissions_df(store))
    assert set(edits["synthesis"]) and f"{edits['synthesis'].iloc[0]:.4g}" in html
    # No transcript, program or private value on this page.
    assert SECRET not in html and HOSTILE not in html and CANARY not in html
    assert 'class="msg ' not in html and 'class="diff"' not in html


def test_a_missing_program_blob_leaves_the_rest_of_the_page(store: Store) -> None:
    write_run(store, _run())
    summary = summarize(store.events, run_stream_id("alpha"))
    digest = summary.submissions[2].program_digest
    assert digest is not None
    lose_program(store.blobs, digest)
    html = run_report(store, run_stream_id("alpha"), redact=Redactor().text).html
    assert "Submissions" in html and 'class="msg ' in html and "initial program (reference)" in html
    assert "[no parent program to compare with]" in html and "cannot be read" in html
