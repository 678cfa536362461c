"""The HTML report in a real browser: Debian's ``chromium``, headless, driven by Playwright.

A real experiment (the reference Agent on two Benchmarks) is run with the CLI, the
reports of the experiment and of one of its Runs written with the CLI, and each page
opened from its file with every network request refused: each figure must have drawn
(plotly's ``.main-svg`` inside its container, with its traces), the console must hold no
error, and the diff viewer must show the diff of the Submission chosen. Full-page
screenshots are saved; the session's summary prints where.

Playwright never downloads a browser here: it drives the system's ``chromium``. Without
it the test is skipped with how to install it, except under ``EVOPOLICY_REQUIRE_EXTRAS=1``
(CI), where it fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CLI
from tests.support.requires import require_group, require_program


def _chromium() -> str:
    require_group("browser", "playwright")
    found = shutil.which("chromium-browser")
    return found or require_program("chromium", "apt-get install chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()  # skips, saying how to install it, before playwright is imported
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: chromium's own sandbox needs user namespaces a container may not give.
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


def _cli(*args: str) -> Any:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


# Two cells (the reference Agent on CartPole and on Acrobot, one seed) under the quick
# profile with a small budget: real Runs, a real experiment stream.
SPEC = """
name = "browser"
profile = "quick"
seeds = 1

[run]
episode_budget = 4

[[agents]]
name = "reference"
provider = "reference"

[[benchmarks]]
id = "cartpole"

[[benchmarks]]
id = "acrobot"
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The report of the experiment, and of its CartPole Run."""
    root = tmp_path_factory.mktemp("report-browser")
    store = str(root / "store")
    (root / "spec.toml").write_text(SPEC, encoding="utf-8")
    done = subprocess.run(
        [*CLI, "experiment", "run", str(root / "spec.toml"), "--store", store],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cells = _cli("experiment", "status", "browser", "--store", store, "--json")["cell_runs"]
    assert [c["status"] for c in cells] == ["finished", "finished"], cells
    run_id = next(c["run_id"] for c in cells if c["benchmark"] == "cartpole")
    written = _cli("report", run_id, "-o", str(root / "run.html"), "--store", store, "--json")
    assert written["runs"] == 1 and written["bytes"] == (root / "run.html").stat().st_size
    written = _cli(
        "report",
        "--experiment",
        "browser",
        "-o",
        str(root / "experiment.html"),
        "--store",
        store,
        "--json",
    )
    assert written["runs"] == 2
    return {"run": root / "run.html", "experiment": root / "experiment.html"}


class Opened:
    """A report opened in a page, with what the page logged and tried to fetch."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def refuse(route: Any) -> None:
            if route.request.url.startswith("file://"):
                route.continue_()
            else:  # the page must need nothing from the network
                self.requests.append(route.request.url)
                route.abort()

        self.page.route("**/*", refuse)
        self.page.goto(path.as_uri(), wait_until="load")

    def figures(self) -> list[dict[str, Any]]:
        """Each figure container: its id, the plotly SVGs drawn in it, and its traces."""
        # Plotly draws synchronously in newPlot, which the page's scripts call as it loads.
        figures: list[dict[str, Any]] = self.page.evaluate(
            """() => Array.from(document.querySelectorAll('div.figure')).map(f => {
                const plot = f.querySelector('.plotly-graph-div');
                return {id: f.dataset.figure, svgs: f.querySelectorAll('.main-svg').length,
                        traces: plot && plot.data ? plot.data.length : 0,
                        drawn: f.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length};
            })"""
        )
        return figures


def test_every_plot_of_a_runs_page_renders_with_no_console_error_and_the_diff_viewer_switches(
    browser: Any, pages: dict[str, Path], screenshot_path: Callable[[str], Path]
) -> None:
    opened = Opened(browser, pages["run"])
    page = opened.page
    figures = opened.figures()
    assert [f["id"] for f in figures] == ["plot-timeline", "plot-submissions", "plot-best"]
    for figure in figures:
        assert figure["svgs"] >= 1, figure  # plotly drew it
        assert figure["traces"] >= 1 and figure["drawn"] >= 1, figure
    # The diff viewer: choosing a Submission shows its diff and hides every other one.
    options = page.eval_on_selector_all("#diff-select option", "os => os.map(o => o.value)")
    assert len(options) >= 2
    for value in reversed(options):
        page.select_option("#diff-select", value)
        shown = page.eval_on_selector_all(
            "#diff-box pre[data-diff]", "ps => ps.filter(p => !p.hidden).map(p => p.dataset.diff)"
        )
        assert shown == [value]
        assert page.locator(f'#diff-box pre[data-diff="{value}"]').is_visible()
    # The transcript's reasoning is folded; tool calls are there.
    assert page.locator("#transcript .msg").count() >= 3
    assert opened.errors == [], opened.errors
    assert opened.requests == [], opened.requests
    shot = screenshot_path("report-run.png")
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.close()


def test_every_plot_of_an_experiments_page_renders_with_no_console_error(
    browser: Any, pages: dict[str, Path], screenshot_path: Callable[[str], Path]
) -> None:
    opened = Opened(browser, pages["experiment"])
    page = opened.page
    figures = opened.figures()
    # The leaderboard, a best-so-far figure per Benchmark, selection validity, edit dynamics.
    assert [f["id"] for f in figures] == [
        "plot-leaderboard",
        "plot-best-0",
        "plot-best-1",
        "plot-selection",
        "plot-edits",
    ]
    for figure in figures:
        assert figure["svgs"] >= 1, figure
        assert figure["traces"] >= 1 and figure["drawn"] >= 1, figure
    # Each Benchmark's figure is titled by it; the leaderboard ranks the one agent first.
    titles = page.eval_on_selector_all(".gtitle", "ts => ts.map(t => t.textContent)")
    assert (
        "acrobot: best so far vs Episodes used" in titles
        and "cartpole: best so far vs Episodes used" in titles
    )
    board = page.locator("#leaderboard table").first.inner_text()
    assert "reference" in board
    assert opened.errors == [], opened.errors
    assert opened.requests == [], opened.requests
    shot = screenshot_path("report-experiment.png")
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.close()
