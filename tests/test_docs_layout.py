"""The Layout of docs/development.md names the tree as it is.

The page's ``text`` block under "## Layout" is a tree: each line names one or more entries
(``name.py`` or ``name/``) at its indentation, two spaces a level, then says what they hold.
Every named entry must exist, and every module and package of the kernel's top level (and
every package one level down) must be named, so the page cannot fall behind a rename or a
new package.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "development.md"
ENTRY = re.compile(r"^( *)((?:[\w.-]+(?:\.py|/))(?: [\w.-]+(?:\.py|/))*)(?: {2,}|$)")


def layout_block(text: str) -> list[str]:
    section = text.split("\n## Layout\n", 1)[1]
    block = section.split("```text\n", 1)[1].split("\n```", 1)[0]
    return block.splitlines()


def named_paths(lines: list[str]) -> list[Path]:
    """Every path the tree names, each relative to the checkout."""
    parents: list[Path] = []
    found = []
    for line in lines:
        match = ENTRY.match(line)
        if not match:
            continue  # a description carried over to the next line
        depth = len(match.group(1)) // 2
        parents = parents[:depth]
        base = parents[-1] if parents else Path()
        names = match.group(2).split()
        for name in names:
            found.append(base / name.rstrip("/"))
        if names[-1].endswith("/"):
            parents.append(base / names[-1].rstrip("/"))
    return found


def test_every_named_entry_exists() -> None:
    missing = [
        str(p) for p in named_paths(layout_block(PAGE.read_text())) if not (ROOT / p).exists()
    ]
    assert not missing, f"docs/development.md's Layout names what is not there: {missing}"


def test_the_kernel_is_named_to_its_subpackages() -> None:
    named = set(named_paths(layout_block(PAGE.read_text())))
    kernel = ROOT / "evopolicygym"
    entries = [p for p in kernel.iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    packages = [p for p in kernel.iterdir() if (p / "__init__.py").exists()]
    entries += packages
    entries += [q for p in packages for q in p.iterdir() if (q / "__init__.py").exists()]
    unnamed = sorted(str(p.relative_to(ROOT)) for p in entries if p.relative_to(ROOT) not in named)
    assert not unnamed, f"docs/development.md's Layout does not name: {unnamed}"


def test_the_reader_follows_the_tree() -> None:
    lines = [
        "evopolicygym/     the kernel",
        "  policy.py values.py   leaves",
        "  run/            the Run",
        "                  more words",
        "    decider/      rules",
        "      state.py    the state",
        "  cli/            commands",
        "tests/            tests",
    ]
    assert [str(p) for p in named_paths(lines)] == [
        "evopolicygym",
        "evopolicygym/policy.py",
        "evopolicygym/values.py",
        "evopolicygym/run",
        "evopolicygym/run/decider",
        "evopolicygym/run/decider/state.py",
        "evopolicygym/cli",
        "tests",
    ]
