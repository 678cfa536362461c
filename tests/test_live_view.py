"""The live view of `evopolicy run` in a real terminal (tmux) at 80x24 and 160x45: a log of
Submissions, Validation and Assessment lines that scrolls above a status panel (phase,
budget bar, best so far), which is drawn once and stays put; no line wider than the
terminal. Both terminals run at once, each a Run of the reference Agent."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.requires import require_program


@pytest.fixture(autouse=True)
def tmux() -> None:
    """CI installs tmux and sets EVOPOLICY_REQUIRE_EXTRAS, so there a missing tmux fails."""
    require_program("tmux", "apt-get install tmux")


SIZES = [(80, 24), (160, 45)]
DEADLINE_S = 180.0


@dataclass(frozen=True)
class Screen:
    width: int
    store: Path
    lines: list[str]  # the whole scrollback and screen, lines the terminal wrapped joined
    exit_code: int


def _tmux(socket: Path, *args: str) -> str:
    done = subprocess.run(
        ["tmux", "-S", str(socket), *args], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def screens(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Screen]:
    root = tmp_path_factory.mktemp("live")
    socket = root / "tmux"
    env = {
        key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "TMUX")
    }
    env.pop("EVOPOLICY_STORE", None)
    stores = {width: root / f"store-{width}" for width, _ in SIZES}
    try:
        for index, (width, height) in enumerate(SIZES):
            command = shlex.join(
                [
                    sys.executable, "-m", "evopolicygym.cli", "run", "--benchmark", "cartpole",
                    "--budget", "4", "--validation-episodes", "1", "--assessment-episodes", "1",
                    "--max-candidates", "2", "--allow-uncontained-agent",
                    "--store", str(stores[width]),
                ]
            )  # fmt: skip
            shell = f"{command}; echo EXIT=$?; sleep 600"
            if index == 0:
                subprocess.run(
                    ["tmux", "-S", str(socket), "-f", os.devnull, "new-session", "-d",
                     "-s", f"w{width}", "-x", str(width), "-y", str(height), shell],
                    env=env, check=True, timeout=30,
                )  # fmt: skip
            else:
                _tmux(
                    socket,
                    "new-session",
                    "-d",
                    "-s",
                    f"w{width}",
                    "-x",
                    str(width),
                    "-y",
                    str(height),
                    shell,
                )
        captured: dict[int, str] = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(captured) < len(SIZES) and time.monotonic() < deadline:
            for width, _ in SIZES:
                if width in captured:
                    continue
                text = _tmux(
                    socket, "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", f"w{width}"
                )
                if "EXIT=" in text:
                    captured[width] = text
            time.sleep(0.5)
        assert len(captured) == len(SIZES), "the Runs did not end in time"
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, check=False)
    result = {}
    for width, text in captured.items():
        lines = [line.rstrip() for line in text.splitlines()]
        code = int(next(line for line in lines if line.startswith("EXIT="))[5:])
        result[width] = Screen(width, stores[width], lines, code)
    return result


def _summary(store: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "record", "--store", str(store),
         "list", "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    [run] = json.loads(done.stdout)
    shown = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "record", "--store", str(store),
         "show", run["run_id"], "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(shown.stdout)


@pytest.mark.parametrize("width", [width for width, _ in SIZES])
def test_the_log_keeps_every_submission_validation_and_assessment(
    screens: dict[int, Screen], width: int
) -> None:
    screen = screens[width]
    assert screen.exit_code == 0, "\n".join(screen.lines)
    text = "\n".join(screen.lines)
    summary = _summary(screen.store)
    assert summary["submissions"]
    for entry in summary["submissions"]:
        line = (
            f"submission {entry['submission_id']}  score {entry['score']:g}  "
            f"{entry['episodes']} Episode"
        )
        assert line in text, line
    assert re.search(r"^validation: initial program scores \S+", text, re.MULTILINE)
    final, score = summary["final_submission_id"], summary["validation_score"]
    assert f"validation: submission {final} scores {score:g}" in text
    assessment = summary["assessment"]
    assert (
        f"assessment: submission {assessment['submission_id']} scores {assessment['score']:g}"
        in text
    )
    assert "run finished: finished" in text
    # the log comes before the panel, the panel before the outcome
    assert text.index("submission 1  score") < text.index("run finished") < text.index("budget [")


@pytest.mark.parametrize("width", [width for width, _ in SIZES])
def test_the_status_panel_is_drawn_once_and_stays(screens: dict[int, Screen], width: int) -> None:
    lines = screens[width].lines
    bars = [line for line in lines if line.startswith("budget [")]
    assert len(bars) == 1, "\n".join(lines)  # one panel left on the screen, not a frame per update
    [bar] = bars
    assert bar.endswith("] 4/4 Episodes") and "." not in bar.partition("]")[0]
    panel = lines.index(bar)
    assert lines[panel - 1].endswith("finished") and lines[panel - 1].startswith("run ")
    assert lines[panel + 1].startswith("best so far: ")


@pytest.mark.parametrize("width", [width for width, _ in SIZES])
def test_no_line_is_wider_than_the_terminal(screens: dict[int, Screen], width: int) -> None:
    for line in screens[width].lines:
        if re.match(r"^[a-z ]+: (\S+ )*evopolicy ", line):
            # a command to paste ("replay it: ..."): left for the terminal to wrap, unbroken
            continue
        assert len(line) <= width, line
