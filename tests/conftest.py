"""The event store fixtures of the contract tests, on every backend of
``tests/support/backends.py`` (add one there and every contract test runs on it); the
screenshots a test saves; ``--record-skipped``; the suite's hypothesis profile; Ctrl-C
as a terminal gives it to the commands the tests start."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from evopolicygym.records.store import EventStore
from tests.support.backends import BACKENDS, Opener

# No per-example deadline anywhere: it is a timing assertion, and on a shared 2-core
# machine a GC pause or a busy neighbour would fail a correct example.
settings.register_profile("evopolicy", deadline=None)
settings.load_profile("evopolicy")


@pytest.fixture(params=sorted(BACKENDS))
def open_backend(request: pytest.FixtureRequest) -> Opener:
    """The backend's opener; call it as ``open_backend(location, create=True)``."""
    return BACKENDS[request.param]


@pytest.fixture
def event_store(open_backend: Opener, tmp_path: Path) -> Iterator[EventStore]:
    """A new, empty store of each backend in ``tmp_path``."""
    store = open_backend(tmp_path, create=True)
    yield store
    store.close()


# --------------------------------------------------------------------------- screenshots

_SCREENSHOTS = pytest.StashKey[list[Path]]()


@pytest.fixture
def screenshot_path(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """``screenshot_path(name)``: where a test saves a screenshot; the session's summary
    lists every one saved, so CI output says where to find them."""

    def path(name: str) -> Path:
        saved = tmp_path_factory.mktemp("screenshots") / name
        request.config.stash.setdefault(_SCREENSHOTS, []).append(saved)
        return saved

    return path


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    saved = [p for p in config.stash.get(_SCREENSHOTS, []) if p.exists()]
    if saved:
        terminalreporter.write_sep("-", "screenshots saved")
        for path in saved:
            terminalreporter.write_line(str(path))


# --------------------------------------------------------------------------- tiers


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-skipped",
        metavar="FILE",
        help="write the node id of every skipped test (or module) to FILE, one a line; "
        ".ci/run's extras tier runs exactly these once everything is installed",
    )


class _RecordSkipped:
    """Collects skipped node ids; under xdist only the controller writes (its workers'
    reports reach it through these same hooks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.nodeids: dict[str, None] = {}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.nodeids[report.nodeid] = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            self.nodeids[report.nodeid] = None

    def pytest_sessionfinish(self) -> None:
        self.path.write_text("".join(f"{nodeid}\n" for nodeid in self.nodeids), encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    # Started as a background job of a non-interactive shell (`cmd &`, as CI scripts do), the
    # suite inherits SIGINT ignored and would pass that on to every command a test starts:
    # Python keeps an ignored SIGINT ignored, so the Ctrl-C tests would see a command that
    # cannot be interrupted. A test's commands get SIGINT as a terminal would give it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    path = config.getoption("--record-skipped")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_RecordSkipped(Path(path)), "record-skipped")
