"""``evopolicy view`` in a real browser: Debian's ``chromium``, headless, driven by Playwright.

One store holds a real Run (the reference Agent on CartPole, recorded by the CLI), a
synthetic Run whose program text, file names, Agent messages, reasoning, tool calls and
errors carry HTML with event handlers, and an experiment over both. One ``evopolicy view``
subprocess serves it. Every page is opened as a person would: no console error (a CSP
violation is one), no request leaves the viewer's origin, every figure drawn, the hostile
text shown as text and none of it run (``window.__pwned`` stays undefined, no element holds
its handlers). Full-page screenshots are saved; the session's summary prints where.

Live: with the list and a Run's page open, another process records a Run; the pages follow
it without a reload. Token: a second server with a token refuses a browser without it, and
``/?token=`` logs the browser in.

Playwright never downloads a browser here: it drives the system's ``chromium``. Without it
the test is skipped with how to install it, except under ``EVOPOLICY_REQUIRE_EXTRAS=1``
(CI), where it fails. A page whose module has no routes yet is skipped, naming it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import msgspec
import pytest

from tests.support.cli import CLI
from tests.support.requires import require_group, require_program
from tests.support.runlogs import Planned, SynthRun, policy_source, write_experiment, write_run
from tests.support.viewer import require_view

IMG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=1</script>"
SVG = '<svg onload="window.__pwned=1">'
LINK = '<a href="javascript:window.__pwned=1">click me</a>'
HOSTILE = (IMG, SCRIPT, SVG, LINK)
HOSTILE_FILE = IMG + ".py"
TOKEN = "view-browser-token-5d1c9a"
TOKEN_ENV = "EVOPOLICY_VIEW_TOKEN"
HOSTILE_RUN = "hostile-run"
# A small Run: 4 Episodes of budget, one candidate, one Episode each to validate and assess.
REAL_BUDGET = [
    "--budget", "4", "--validation-episodes", "1", "--max-candidates", "1",
    "--assessment-episodes", "1", "--allow-uncontained-agent",
]  # fmt: skip
WAIT_MS = 30_000


def _chromium() -> str:
    require_group("browser", "playwright")
    found = shutil.which("chromium-browser")
    return found or require_program("chromium", "apt-get install chromium")


def _page_routes(module: str) -> None:
    """Skip unless ``evopolicygym.view.<module>`` serves its page (others are writing them)."""
    if not importlib.import_module(f"evopolicygym.view.{module}").ROUTES:
        pytest.skip(f"the page of evopolicygym.view.{module} is not written yet (its routes 404)")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("EVOPOLICY_STORE", TOKEN_ENV)}
    return {**env, "NO_COLOR": "1", **extra}


# --------------------------------------------------------------------------- the store


def _hostile_program(gain: float) -> dict[str, str]:
    comments = "".join(f"# {text}\n" for text in HOSTILE)
    return {
        "policy.py": comments + policy_source(gain) + f"NOTE = {SCRIPT!r}\n",
        HOSTILE_FILE: f"TEXT = {IMG!r}\n",
    }


def _taint(new: Any) -> Any:
    """One event of the synthetic Run, with hostile text where an Agent or a failure can
    put some: the conversation (content, reasoning, tool calls, an error record), a failed
    evaluation's error and the Agent's last error."""
    from evopolicygym.records.events import (
        AgentExited,
        AgentMessages,
        EvaluationFailed,
        decode_event,
        new_event,
    )
    from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage

    event = decode_event(new.type, new.schema_version, new.payload)
    everything = " ".join(HOSTILE)
    if isinstance(event, AgentMessages) and event.chunk == 0:
        said = [
            Message(
                role="assistant",
                content=f"I will write {everything}",
                reasoning=f"thinking {everything}",
                tool_calls=[
                    ToolCall(
                        id="call_hostile",
                        name="write_file",
                        arguments={"path": f"program/{HOSTILE_FILE}", "content": SCRIPT},
                    )
                ],
                usage=Usage(input_tokens=10, output_tokens=5),
            ),
            Message(role="tool", content=SVG, tool_call_id="call_hostile", name="write_file"),
            Message(role="error", content=LINK, error=AgentFault(kind="synthetic")),
        ]
        event = msgspec.structs.replace(
            event, messages=[*event.messages[:1], *said, *event.messages[1:]]
        )
    elif isinstance(event, EvaluationFailed):
        event = msgspec.structs.replace(event, error=f"worker said {IMG} {SCRIPT}")
    elif isinstance(event, AgentExited):
        event = msgspec.structs.replace(event, errors=1, last_error=SVG)
    return new_event(event, new.event_id)


def _write_hostile_run(store: Any) -> None:
    from evopolicygym.transcript import AgentIdentity

    run = SynthRun(
        run_id=HOSTILE_RUN,
        submissions=[
            Planned(_hostile_program(0.5), [0, 1], [1.0, 2.0]),
            Planned(_hostile_program(0.7), [0, 1], [3.0, 4.0], parent=1),
            Planned(_hostile_program(0.9), [2], None, parent=2),
        ],
        candidates=[2, 1],
        agent=AgentIdentity(name="reference", provider="reference", model=IMG),
    )
    # write_run appends the whole stream at once: taint it on its way into the log.
    events = SimpleNamespace(
        append=lambda stream, batch, version: store.events.append(
            stream, [_taint(e) for e in batch], version
        )
    )
    write_run(SimpleNamespace(blobs=store.blobs, events=events), run, canary=False)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Store:
    path: Path
    real: str  # the Run recorded by the CLI
    hostile: str  # the synthetic Run carrying hostile text


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    require_view()
    root = tmp_path_factory.mktemp("view-browser")
    path = root / "store"
    command = [*CLI, "run", "--benchmark", "cartpole", "--agent", "reference", *REAL_BUDGET]
    done = subprocess.run(
        [*command, "--store", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    real = json.loads(done.stdout)["run_id"]
    from evopolicygym.records.location import open_store

    opened = open_store(path)
    try:
        _write_hostile_run(opened)
        write_experiment(
            opened,
            [
                ("reference", "cartpole", 0, 0, [(real, "finished")]),
                ("reference", "toy", 0, 0, [(HOSTILE_RUN, "finished")]),
            ],
        )
    finally:
        opened.close()
    return Store(path, real, HOSTILE_RUN)


# --------------------------------------------------------------------------- the servers


@dataclass
class Server:
    origin: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[str]
    log: Path

    def stop(self) -> None:
        self.process.terminate()  # SIGTERM to the pid we started: uvicorn stops gracefully
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def _serve(store: Path, root: Path, name: str, **env: str) -> Server:
    log = root / f"{name}.log"
    command = [*CLI, "view", "--store", str(store), "--port", "0", "--poll", "0.2"]
    process = subprocess.Popen(
        [*command, "--cache", str(root / f"{name}-cache")],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env=_env(**env),
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    found = re.search(r" on (http://127\.0\.0\.1:\d+)/", line)
    if found is None:
        process.kill()
        process.wait(5)
        raise AssertionError(f"the viewer did not start: {line!r} {log.read_text()}")
    return Server(found.group(1), process, log)


@pytest.fixture(scope="module")
def server(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = _serve(store.path, tmp_path_factory.mktemp("view-server"), "open")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()  # skips, saying how to install it, before playwright is imported
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: chromium's own sandbox needs user namespaces a container may not give.
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


# --------------------------------------------------------------------------- pages


class Visit:
    """A page of one browser context on the viewer, with what it logged and what it tried
    to fetch from anywhere but the viewer."""

    def __init__(self, context: Any, origin: str) -> None:
        self.origin = origin
        self.page = context.new_page()
        self.page.set_viewport_size({"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.elsewhere: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def refuse(route: Any) -> None:
            if route.request.url.startswith(origin + "/"):
                route.continue_()
            else:  # everything a page needs ships with the viewer
                self.elsewhere.append(route.request.url)
                route.abort()

        self.page.route("**/*", refuse)

    def open(self, path: str, status: int = 200) -> Any:
        response = self.page.goto(self.origin + path, wait_until="load")
        assert response is not None and response.status == status, (path, response)
        return response


@pytest.fixture
def visit(browser: Any, server: Server) -> Iterator[Callable[[], Visit]]:
    context = browser.new_context()
    yield lambda: Visit(context, server.origin)
    context.close()


FIGURES = """() => Array.from(document.querySelectorAll('[data-spec]')).map(f => ({
    id: f.id || f.dataset.figure || '', svgs: f.querySelectorAll('.main-svg').length}))"""
INERT = """() => ({
    pwned: typeof window.__pwned,
    handlers: document.querySelectorAll('[onerror],[onload],[onclick],[onmouseover]').length,
    inline: document.querySelectorAll('script:not([src])').length,
    foreign: Array.from(document.querySelectorAll('script[src]'))
        .map(s => s.getAttribute('src')).filter(s => !s.startsWith('/static/')),
    javascript: Array.from(document.querySelectorAll('[href],[src],[action]'))
        .filter(e => /^\\s*javascript:/i.test(e.getAttribute('href') || e.getAttribute('src')
            || e.getAttribute('action') || '')).length,
    planted: document.querySelectorAll('img[src="x"], svg[onload]').length})"""


def _check(
    visit: Visit,
    shot: Path,
    *,
    shows: tuple[str, ...] = (),
    figures: int = 0,
) -> str:
    """The page as it stands: figures drawn, hostile text inert and shown as text, no
    console error, nothing fetched elsewhere; a full-page screenshot. Returns its text."""
    page = visit.page
    if page.locator("[data-spec]").count():
        # plotly.min.js loads deferred; view.js draws on load.
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('[data-spec]'))"
            ".every(f => f.querySelector('.main-svg'))",
            timeout=WAIT_MS,
        )
    drawn = page.evaluate(FIGURES)
    assert len(drawn) >= figures, drawn
    assert all(f["svgs"] >= 1 for f in drawn), drawn
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    text = page.inner_text("body")
    for hostile in shows:
        assert hostile in text, (hostile, page.url)
    inert = page.evaluate(INERT)
    assert inert == {
        "pwned": "undefined",
        "handlers": 0,
        "inline": 0,
        "foreign": [],
        "javascript": 0,
        "planted": 0,
    }, (page.url, inert)
    assert visit.errors == [], (page.url, visit.errors)
    assert visit.elsewhere == [], (page.url, visit.elsewhere)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 5_000
    return text


def test_the_list_shows_both_runs_and_the_hostile_model_as_text(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    opened = visit()
    opened.open("/")
    text = _check(opened, screenshot_path("view-list.png"), shows=(IMG,))
    assert store.real in text and store.hostile in text
    links = opened.page.eval_on_selector_all("a.run-link", "as => as.map(a => a.textContent)")
    assert sorted(links) == sorted([store.real, store.hostile])


@pytest.mark.parametrize("which", ["real", "hostile"])
def test_a_runs_page_draws_its_figures_and_keeps_hostile_text_inert(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path], which: str
) -> None:
    _page_routes("run_page")
    run_id = getattr(store, which)
    opened = visit()
    opened.open(f"/runs/{quote(run_id)}")
    # The hostile Run's model, Agent error, failed evaluation and conversation summary.
    shows = HOSTILE if which == "hostile" else ()
    text = _check(opened, screenshot_path(f"view-run-{which}.png"), shows=shows, figures=1)
    assert run_id in text
    # The Submissions table links each Submission's page.
    hrefs = opened.page.eval_on_selector_all(
        f'a[href*="/runs/{run_id}/submissions/"]', "as => as.map(a => a.getAttribute('href'))"
    )
    numbers = {int(m.group(1)) for h in hrefs if (m := re.search(r"/submissions/(\d+)$", h))}
    assert numbers >= ({1, 2, 3} if which == "hostile" else {1}), hrefs


@pytest.mark.parametrize(
    ("which", "sid", "shows"),
    [
        ("real", 1, ()),
        ("hostile", 2, (*HOSTILE, HOSTILE_FILE)),  # its program and its diff to 1
        ("hostile", 3, (IMG, SCRIPT)),  # the failed evaluation's error
    ],
)
def test_a_submissions_page_shows_program_and_feedback_as_text(
    visit: Callable[[], Visit],
    store: Store,
    screenshot_path: Callable[[str], Path],
    which: str,
    sid: int,
    shows: tuple[str, ...],
) -> None:
    _page_routes("submission_page")
    run_id = getattr(store, which)
    opened = visit()
    opened.open(f"/runs/{quote(run_id)}/submissions/{sid}")
    _check(opened, screenshot_path(f"view-submission-{which}-{sid}.png"), shows=shows)
    # Artifacts (videos, traces) the page links are served by the viewer, with a type.
    artifacts = opened.page.eval_on_selector_all(
        '[href*="/artifacts/"], [src*="/artifacts/"]',
        "es => es.map(e => e.getAttribute('href') || e.getAttribute('src'))",
    )
    for artifact in sorted(set(artifacts))[:4]:
        answer = opened.page.request.get(
            opened.origin + artifact if artifact.startswith("/") else artifact
        )
        assert answer.status == 200 and answer.headers.get("content-type"), (artifact, answer)
    if which == "hostile" and sid == 2:
        # The hostile file name is a file of the program, shown by name.
        assert HOSTILE_FILE in opened.page.inner_text("body")


def test_the_conversation_shows_messages_reasoning_and_tool_calls_as_text(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    _page_routes("run_page")
    opened = visit()
    response = opened.page.goto(
        f"{opened.origin}/runs/{store.hostile}/conversation?attempt=1", wait_until="load"
    )
    if response is not None and response.status == 404 and "conversation" not in response.text():
        pytest.skip("the conversation page is not written yet (its route 404s)")
    assert response is not None and response.status == 200, response
    text = _check(opened, screenshot_path("view-conversation.png"), shows=HOSTILE)
    assert "thinking " + IMG in text  # the reasoning, unfolded
    # The tool call's arguments, as text or as the JSON they were recorded as.
    assert HOSTILE_FILE in text or json.dumps(HOSTILE_FILE)[1:-1] in text


def test_the_event_log_shows_payloads_as_text(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    _page_routes("run_page")
    opened = visit()
    response = opened.page.goto(f"{opened.origin}/runs/{store.hostile}/events", wait_until="load")
    if response is not None and response.status == 404 and "events" not in response.text():
        pytest.skip("the event log page is not written yet (its route 404s)")
    assert response is not None and response.status == 200, response
    text = _check(opened, screenshot_path("view-events.png"), shows=(SCRIPT,))
    assert "RunCreated" in text or "run_created" in text.lower(), text[:500]


def test_the_experiments_and_an_experiments_page(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    _page_routes("experiments_page")
    opened = visit()
    opened.open("/experiments")
    text = _check(opened, screenshot_path("view-experiments.png"))
    assert "demo" in text
    opened.open("/experiments/demo")
    text = _check(opened, screenshot_path("view-experiment.png"), figures=1)
    assert "reference" in text
    hrefs = opened.page.eval_on_selector_all(
        "a[href^='/runs/']", "as => as.map(a => a.getAttribute('href'))"
    )
    assert any(store.real in h for h in hrefs) and any(store.hostile in h for h in hrefs), hrefs


def test_the_comparison_of_the_two_runs(
    visit: Callable[[], Visit], store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    _page_routes("compare_page")
    opened = visit()
    opened.open(f"/compare?a={quote(store.real)}&b={quote(store.hostile)}")
    # The programs diffed: the hostile one's text, and its hostile file name.
    text = _check(
        opened, screenshot_path("view-compare.png"), shows=(SCRIPT, HOSTILE_FILE), figures=1
    )
    assert store.real in text and store.hostile in text


# --------------------------------------------------------------------------- live


AGENT = """
import json, os, pathlib, subprocess, time
CLI = json.loads(os.environ["EVOPOLICY_CLI"])
GO = pathlib.Path({go!r})

def session(*args):
    subprocess.run([*CLI, "session", *args], check=True, capture_output=True)

session("submit", "--episodes", "0")
# Hold the Run open until the test has seen it running (a minute at most).
deadline = time.monotonic() + 60
while not GO.exists() and time.monotonic() < deadline:
    time.sleep(0.1)
for index in range(1, 4):
    session("submit", "--episodes", str(index), "--parent", "0")
session("finish", "1")
"""

ROW_STATUS = """([id]) => {
    const links = Array.from(document.querySelectorAll('a.run-link'));
    const link = links.find(a => a.textContent === id);
    const row = link && link.closest('tr');
    const badge = row && row.querySelector('.badge');
    return badge ? badge.textContent : null;
}"""
SUBMISSIONS = """([id]) => new Set(Array.from(document.querySelectorAll('a[href*="/submissions/"]'))
    .map(a => a.getAttribute('href'))
    .filter(h => h.startsWith('/runs/' + encodeURIComponent(id) + '/submissions/'))
    .map(h => h.split('/submissions/')[1].split(/[/?#]/)[0])).size"""


def test_open_pages_follow_a_run_another_process_records(
    browser: Any,
    server: Server,
    store: Store,
    tmp_path: Path,
    screenshot_path: Callable[[str], Path],
) -> None:
    go = tmp_path / "go"
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(AGENT.format(go=str(go))), encoding="utf-8")
    context = browser.new_context()
    listing = Visit(context, server.origin)
    listing.open("/")
    known = listing.page.eval_on_selector_all("a.run-link", "as => as.map(a => a.textContent)")
    listing.page.evaluate("() => { window.__marker = 42; }")
    command = [*CLI, "run", "--benchmark", "cartpole", *REAL_BUDGET, "--store", str(store.path)]
    run = subprocess.Popen(
        [*command, "--agent", "command", "--agent-command", f"{sys.executable} {agent}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        listing.page.wait_for_function(
            "([n]) => document.querySelectorAll('a.run-link').length > n",
            arg=[len(known)],
            timeout=WAIT_MS,
        )
        ids = listing.page.eval_on_selector_all("a.run-link", "as => as.map(a => a.textContent)")
        (new,) = set(ids) - set(known)
        # The Agent waits for the go file: the Run is running, and the list says so.
        assert listing.page.evaluate(ROW_STATUS, [new]) == "running"
        assert listing.page.evaluate("() => window.__marker") == 42  # no reload
        following = None
        if importlib.import_module("evopolicygym.view.run_page").ROUTES:
            following = Visit(context, server.origin)
            following.open(f"/runs/{quote(new)}")
            following.page.wait_for_function(
                f"(a) => ({SUBMISSIONS})(a) >= 1", arg=[new], timeout=WAIT_MS
            )
            following.page.evaluate("() => { window.__marker = 42; }")
        go.write_text("go", encoding="utf-8")
        listing.page.wait_for_function(
            f"(a) => ({ROW_STATUS})(a) === 'finished'", arg=[new], timeout=WAIT_MS
        )
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert json.loads(out)["run_id"] == new
        assert listing.page.evaluate("() => window.__marker") == 42
        assert listing.errors == [] and listing.elsewhere == [], (listing.errors, listing.elsewhere)
        listing.page.screenshot(path=str(screenshot_path("view-live-list.png")), full_page=True)
        if following is not None:
            following.page.wait_for_function(
                f"(a) => ({SUBMISSIONS})(a) >= 4", arg=[new], timeout=WAIT_MS
            )
            assert following.page.evaluate("() => window.__marker") == 42
            assert following.errors == [] and following.elsewhere == [], following.errors
            following.page.screenshot(
                path=str(screenshot_path("view-live-run.png")), full_page=True
            )
    finally:
        if run.poll() is None:
            run.terminate()
            run.wait(30)
        context.close()
    if following is None:
        pytest.skip("the list followed the Run; the Run page (run_page) is not written yet")


# --------------------------------------------------------------------------- token


@pytest.fixture(scope="module")
def guarded(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = _serve(
        store.path, tmp_path_factory.mktemp("view-guarded"), "guarded", **{TOKEN_ENV: TOKEN}
    )
    yield started
    started.stop()


def test_with_a_token_a_browser_without_it_is_refused_and_the_printed_address_logs_it_in(
    browser: Any, guarded: Server, store: Store, screenshot_path: Callable[[str], Path]
) -> None:
    context = browser.new_context()
    try:
        stranger = Visit(context, guarded.origin)
        stranger.open("/", status=401)
        stranger.open("/?token=not-the-token-at-all", status=401)
        assert context.cookies() == []
        stranger.page.close()
        visit = Visit(context, guarded.origin)
        response = visit.open(f"/?token={TOKEN}")
        assert visit.page.url == guarded.origin + "/"  # the token left the address
        assert response.request.redirected_from is not None
        (cookie,) = context.cookies()
        assert cookie["httpOnly"] and TOKEN not in cookie["value"], cookie
        text = _check(visit, screenshot_path("view-token-list.png"))
        assert store.real in text
        if importlib.import_module("evopolicygym.view.run_page").ROUTES:
            visit.open(f"/runs/{quote(store.real)}")
            _check(visit, screenshot_path("view-token-run.png"), figures=1)
        head = visit.page.evaluate(
            """() => new Promise((resolve, reject) => {
                const source = new EventSource('/live');
                source.addEventListener('head', e => {
                    source.close();
                    resolve(JSON.parse(e.data).head);
                });
                source.onerror = () => { source.close(); reject(new Error('live refused')); };
            })"""
        )
        assert isinstance(head, int) and head > 0
        assert visit.errors == [], visit.errors
    finally:
        context.close()
