"""The README stays a front door into the docs site, and the site's pages hang together.

Cheap checks of the Markdown sources (the site build itself, ``mkdocs build --strict``, runs in
CI and checks the pages' own links and anchors): the README is at most 200 lines with the two
Quickstart commands, every relative link of the README reaches a file of the checkout (they
must work on GitHub, where the site's pages are read as Markdown), and every page under
``docs/`` is in the site's navigation.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _nav_pages(entries: object) -> list[str]:
    """The page paths of mkdocs.yml's ``nav`` (nested sections flattened)."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def test_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md: at most 200 lines; move the rest to docs/"
    assert "```bash\nuv run evopolicy quickstart\n```" in text
    assert "<!-- not run: " in text.split("```bash\nuv run pytest\n```")[0].splitlines()[-1]


def test_readme_links_reach_files() -> None:
    text = README.read_text(encoding="utf-8")
    targets = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
    assert any(t.startswith("docs/") for t in targets), "README.md links into no docs page"
    for target in targets:
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md links to {target}, which is not in the checkout"


def test_every_docs_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = set(_nav_pages(config["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages - nav == set(), f"docs pages missing from mkdocs.yml's nav: {pages - nav}"
    assert nav - pages == set(), f"mkdocs.yml's nav names pages that do not exist: {nav - pages}"
