"""The examples of README.md and of every docs page, run as a reader runs them, so they cannot
drift from the code.

What runs (a convention of the pages' Markdown source, the same on every page):

- Every fenced ``bash`` and ``python`` block is run, unless the line just before it is
  ``<!-- not run: REASON -->`` (an Agent CLI with a model key, a model server, the network,
  minutes of work, or the test suite itself): each such skip is written in the page with
  its reason, never decided here.
- ``<!-- file: PATH -->`` before a block: the block is a file the examples use (a policy
  program, an experiment spec); it is written at PATH in every directory the examples run
  in, not run. A PATH is given once in all the pages (or with the same text everywhere).
- ``<!-- needs extra: NAME, ... -->`` before a block: it runs where those extras are installed
  (``uv sync --extra NAME``); elsewhere it is skipped saying so, and under
  ``EVOPOLICY_REQUIRE_EXTRAS=1`` (CI, ``--all-extras``) that is a failure.

How: the README's Quickstart section runs first, once per test session (shared by every
pytest-xdist worker), in a temporary directory of its own. Every other ``##`` section of
every page runs as one test, in a fresh temporary directory holding what a reader who ran
the Quickstart there has: a copy of the store it recorded (``./evopolicy-store``, where the
README says it is) and the ``file:`` blocks. A section's blocks run in order in its directory
(a section that exports then loads the dataset it wrote); each command (a line with its ``\\``
continuations) is a real subprocess through ``bash -c``. ``uv run`` is not called: a leading
``uv run`` is stripped and the directory of this interpreter's console scripts (the venv's
``bin``) is put first on ``PATH``, so ``evopolicy`` and ``python`` are the project's own entry
points (``uv run`` from a temporary directory would find no project, and would sync the
environment). A ``python`` block runs as a script with the same interpreter, from the
section's directory. Placeholders: ``RUN`` becomes the Quickstart's Run id, ``POSITION:HASH``
what ``evopolicy record head`` prints there.

Each command must exit 0 with no traceback; an ``evaluate`` must report no failed Episode
(an example whose policy cannot play its Benchmark is not an example); where a page says
what a command prints, ``_PROMISED`` checks those lines. After each section, everything left
in its directory must be ignored by the repository's ``.gitignore``, so following the docs in
a checkout leaves nothing untracked (ruff, which honours ``.gitignore``, then ignores it too).

While writing a page, run only its sections: ``uv run pytest tests/test_doc_examples.py -k
first-run`` (a page's file name, or ``README``).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
QUICKSTART = ("README.md", "Quickstart")
STORE = "evopolicy-store"
EXTRA_MODULES = {
    "box2d": "evopolicygym_box2d",
    "minigrid": "minigrid",
    "ale": "ale_py",
    "mujoco": "mujoco",
    "cards": "evopolicygym_cards",
    "nethack": "evopolicygym_nethack",
    "crafter": "evopolicygym_crafter",
    "textworld": "evopolicygym_textworld",
}

# What a page says a command prints: (a regex on the command, regexes its output must match).
_PROMISED: list[tuple[str, list[str]]] = [
    # "recorded in ./evopolicy-store, replayed from the log and verified"
    (
        r"evopolicy quickstart",
        [r"run finished: finished", r"replayed from the log: the Run verifies"],
    ),
    (r"evopolicy record head\b", [r"(?m)^\d+:[0-9a-f]{64}$"]),  # POSITION:HASH
    (r"evopolicy record verify", [r"(?m)^ok: "]),
    (
        r"evopolicy record replay \S+ --reevaluate",
        [r"every score reproduces"],
    ),  # "re-run every recorded score"
    (r"evopolicy record checkout \S+ final ./best", [r"wrote submission \d+ of run"]),
    (r"evopolicy run .*--agent reference", [r"run finished: finished"]),
]


def page_name(path: Path) -> str:
    """A page as the test ids and messages name it: its path in the repository."""
    return path.relative_to(ROOT).as_posix()


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: str
    section: str
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    marker: str  # "", "not run", "file", "needs extra"
    argument: str  # the reason, the path or the extra

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"

    @property
    def commands(self) -> list[str]:
        """The block's command lines, continuation lines joined, blank lines dropped."""
        out: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            command = (pending + raw).strip()
            pending = ""
            if command and not command.startswith("#"):
                out.append(command)
        return out


_MARKER = re.compile(r"<!--\s*(not run|file|needs extra):\s*(.*?)\s*-->")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w-]*)[^`]*$")


@functools.cache
def page_blocks(path: Path) -> tuple[Block, ...]:
    """Every fenced block of a page with its ``##`` section and the marker on the line before
    (indented fences too, as in an admonition; their indentation is removed)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = _FENCE.match(line)
        if fence:
            start, indent, closing = i, len(fence["indent"]), fence["fence"]
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != closing:
                body.append(lines[i][indent:])
                i += 1
            assert i < len(lines), f"{page_name(path)} line {start + 1}: a fence never closed"
            marker = _MARKER.fullmatch(lines[start - 1].strip()) if start else None
            blocks.append(
                Block(
                    page=page_name(path),
                    section=section,
                    lang=fence["lang"],
                    text="\n".join(body) + "\n",
                    line=start + 1,
                    marker=marker.group(1) if marker else "",
                    argument=marker.group(2) if marker else "",
                )
            )
        i += 1
    return tuple(blocks)


def all_blocks() -> list[Block]:
    return [block for path in pages() for block in page_blocks(path)]


def _runnable(block: Block) -> bool:
    return block.lang in ("bash", "python") and block.marker not in ("not run", "file")


def _slug(section: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-") or "intro"


def _sections() -> list[pytest.ParameterSet]:
    """One test per (page, section) with a runnable block, the README's Quickstart aside."""
    seen: list[tuple[str, str]] = []
    for block in all_blocks():
        key = (block.page, block.section)
        if _runnable(block) and key != QUICKSTART and key not in seen:
            seen.append(key)
    return [pytest.param(page, section, id=f"{page}#{_slug(section)}") for page, section in seen]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOPOLICY_")}
    if "EVOPOLICY_REQUIRE_EXTRAS" in os.environ:
        env["EVOPOLICY_REQUIRE_EXTRAS"] = os.environ["EVOPOLICY_REQUIRE_EXTRAS"]
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    env["COLUMNS"] = "160"
    env["NO_COLOR"] = "1"
    # load_dataset's cache and any Hub access stay out of the user's home and off the network.
    env["HF_HOME"] = str(home / "hf")
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    return env


class Section:
    """One section's directory and the state its placeholders read."""

    def __init__(self, cwd: Path, scratch: Path, run_id: str | None) -> None:
        self.cwd = cwd
        self.scratch = scratch  # beside cwd, never in it: python blocks' scripts, HF cache
        self.run_id = run_id
        self.env = _env(scratch)

    def _substitute(self, command: str) -> str:
        if re.search(r"\bRUN\b", command):
            assert self.run_id, f"{command!r} names RUN but no Run was recorded"
            command = re.sub(r"\bRUN\b", self.run_id, command)
        if "POSITION:HASH" in command:
            head = self.call("evopolicy record head", "POSITION:HASH").stdout.strip()
            command = command.replace("POSITION:HASH", head)
        return command

    def call(self, command: str, shown: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, (
            f"example {shown!r} exited {done.returncode}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )
        assert "Traceback" not in done.stderr, f"{shown!r} printed a traceback:\n{done.stderr}"
        return done

    def run_block(self, block: Block) -> list[tuple[str, str]]:
        """Run one block; (command as written, stdout) per command."""
        if block.lang == "python":
            script = self.scratch / f"{_slug(block.page)}_line_{block.line}.py"
            script.write_text(block.text, encoding="utf-8")
            done = self.call(f"python {script}", f"python block at {block.where}")
            return [(f"python block at {block.where}", done.stdout)]
        outputs = []
        for written in block.commands:
            assert written.startswith(("uv run ", "evopolicy ", "python ")), (
                f"{block.where}: {written!r} is neither `uv run ...` nor `evopolicy ...`;"
                " mark its block <!-- not run: REASON --> if it cannot run here"
            )
            assert not re.match(r"(uv run )?(pytest|python -m pytest)\b", written), (
                "the test suite must not run itself from the docs (mark its block not run)"
            )
            command = self._substitute(written.removeprefix("uv run "))
            done = self.call(command, written)
            _check_output(written, done.stdout, done.stdout + done.stderr)
            outputs.append((written, done.stdout))
        return outputs


def _check_output(written: str, stdout: str, printed: str) -> None:
    """The pages' promises on what was printed (stdout and stderr); evaluate's failure count."""
    for pattern, promised in _PROMISED:
        if re.search(pattern, written):
            for line in promised:
                assert re.search(line, printed), f"{written!r} did not print {line!r}:\n{printed}"
    if re.search(r"evopolicy evaluate\b", written):
        if "--json" in written:
            failures = json.loads(stdout)["failures"]
        else:
            found = re.search(r"failures\s+(\d+) of \d+ Episodes", stdout)
            assert found, f"{written!r} printed no failure count:\n{stdout}"
            failures = int(found.group(1))
        assert failures == 0, f"{written!r}: {failures} Episodes failed; the example cannot play it"


def _file_blocks() -> dict[str, Block]:
    """The ``file:`` blocks of every page by path (each path given once, or identically)."""
    files: dict[str, Block] = {}
    for block in all_blocks():
        if block.marker != "file":
            continue
        earlier = files.setdefault(block.argument, block)
        assert earlier.text == block.text, (
            f"{block.where} and {earlier.where} give {block.argument} different texts"
        )
    return files


def _seed_files(cwd: Path) -> None:
    for path, block in _file_blocks().items():
        target = cwd / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")


def _untracked(cwd: Path) -> list[str]:
    """What `git status` would show in a checkout after these examples (.gitignore applied)."""
    shutil.copy(ROOT / ".gitignore", cwd / ".gitignore")
    # Only the repository's .gitignore counts, not this machine's global excludes.
    git = ["git", "-c", "init.defaultBranch=main", "-c", "core.excludesFile=", "-C", str(cwd)]
    subprocess.run([*git, "init", "-q"], check=True, capture_output=True)
    listed = subprocess.run(
        [*git, "ls-files", "--others", "--exclude-standard", "--directory"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    shutil.rmtree(cwd / ".git")
    (cwd / ".gitignore").unlink()
    return [name for name in listed if name != ".gitignore"]


def _section_blocks(page: str, section: str) -> list[Block]:
    return [b for b in all_blocks() if (b.page, b.section) == (page, section) and _runnable(b)]


def _missing_extras(block: Block) -> list[str]:
    """The extras a ``needs extra:`` block names (comma-separated) that are not installed."""
    if block.marker != "needs extra":
        return []
    missing = []
    for extra in (name.strip() for name in block.argument.split(",")):
        module = EXTRA_MODULES.get(extra)
        assert module, f"{block.where}: unknown extra {extra!r}"
        if find_spec(module) is None:
            missing.append(extra)
    return missing


def _run_quickstart(cwd: Path, scratch: Path) -> dict[str, object]:
    """Run the README's Quickstart section in ``cwd``: the Run id it recorded and what it
    left untracked."""
    for directory in (cwd, scratch):
        shutil.rmtree(directory, ignore_errors=True)  # an earlier worker's failed attempt
        directory.mkdir(parents=True)
    section = Section(cwd, scratch, None)
    blocks = _section_blocks(*QUICKSTART)
    assert blocks, "README has no runnable Quickstart block"
    for block in blocks:
        section.run_block(block)
    listed = section.call("evopolicy record list --json", "record list --json").stdout
    runs = json.loads(listed)
    assert len(runs) == 1 and runs[0]["status"] == "finished", runs
    return {"run_id": runs[0]["run_id"], "untracked": _untracked(cwd)}


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """The Quickstart, run once per session however many xdist workers share it: its
    directory (with the store), the Run id it recorded, and what it left untracked."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's directory, above every worker's own
    root = base / "doc-examples-quickstart"
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "done.json"
        if not done.exists():
            done.write_text(json.dumps(_run_quickstart(root / "reader", root / "scratch")))
        result = json.loads(done.read_text())
    return root / "reader", str(result["run_id"]), list(result["untracked"])


def test_blocks_are_accounted_for() -> None:
    """Every block is run, a file, or skipped with its reason; the suite never runs itself."""
    blocks = all_blocks()
    assert any((b.page, b.section) == QUICKSTART and _runnable(b) for b in blocks)
    _file_blocks()  # each path has one text
    for block in blocks:
        if block.marker == "not run":
            assert len(block.argument) > 10, f"{block.where}: say why it is not run"
        if block.marker == "file":
            assert block.argument and not block.argument.startswith("/"), block
        if block.lang in ("sh", "shell", "console", "shell-session"):
            raise AssertionError(f"{block.where}: shell blocks are ```bash (or ```text for output)")
        if block.lang == "bash" and block.marker != "not run":
            for command in block.commands:
                assert not re.match(r"(uv run )?pytest\b", command), (
                    f"{block.where}: the test command must be in a not-run block"
                )
    pytest_lines = [b for b in blocks if any(re.match(r"uv run pytest\b", c) for c in b.commands)]
    assert pytest_lines and all(b.marker == "not run" for b in pytest_lines)


@pytest.mark.slow
def test_quickstart(quickstart: tuple[Path, str, list[str]]) -> None:
    cwd, run_id, untracked = quickstart
    assert (cwd / STORE / "events.db").exists() or any((cwd / STORE).iterdir())
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run_id)
    assert untracked == [], "the Quickstart wrote files .gitignore does not cover"


@pytest.mark.slow
@pytest.mark.parametrize(("page", "section"), _sections())
def test_doc_section(
    page: str, section: str, quickstart: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    store, run_id, _untracked_there = quickstart
    cwd = tmp_path / "reader"
    cwd.mkdir()
    shutil.copytree(store / STORE, cwd / STORE)
    _seed_files(cwd)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runner = Section(cwd, scratch, run_id)
    skipped = []
    for block in _section_blocks(page, section):
        missing = _missing_extras(block)
        if missing:
            extras = " ".join(f"--extra {extra}" for extra in missing)
            skipped.append(f"{block.where} needs `uv sync {extras}`")
            continue
        runner.run_block(block)
    assert _untracked(cwd) == [], f"{page} ({section}) wrote files .gitignore does not cover"
    if skipped and os.environ.get("EVOPOLICY_REQUIRE_EXTRAS") == "1":
        pytest.fail(f"extras missing but EVOPOLICY_REQUIRE_EXTRAS=1: {skipped}")
    if skipped:
        pytest.skip("; ".join(skipped))
