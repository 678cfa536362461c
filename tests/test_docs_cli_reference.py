"""The CLI reference of the docs site lists every command and every option of ``evopolicy``.

``docs/reference/cli.md`` holds a ``::: mkdocs-click`` directive; the site build renders it
from the click commands, through the command ``docs/hooks/reference.py`` builds (the lazy
groups with each subcommand loaded). Here the page is rendered the way the build renders it
(Python-Markdown with the mkdocs-click extension), and the real CLI is walked independently,
through click's own ``list_commands``/``get_command``: each command must have its section
(its heading's anchor), with every spelling of every option it takes and every argument in
it. A command or option added to the CLI and missing from the page fails here.

Needs the docs dependency group (``uv sync --group docs``); without it the test skips saying
so, and fails under ``EVOPOLICY_REQUIRE_EXTRAS=1``.
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import click

from tests.support.requires import require_group

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "cli.md"
HOOK = ROOT / "docs" / "hooks" / "reference.py"
PROG = "evopolicy"


def _require_docs_group() -> None:
    require_group("docs", "markdown", "mkdocs_click")


def _hook() -> ModuleType:
    """The docs hook, loaded as MkDocs loads it (it registers the module the page imports)."""
    name = "docs_hooks_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HOOK)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def rendered_page() -> str:
    """docs/reference/cli.md as HTML, its directive expanded."""
    import markdown

    _hook()
    converter = markdown.Markdown(extensions=["attr_list", "fenced_code", "tables", "mkdocs-click"])
    return converter.convert(PAGE.read_text(encoding="utf-8"))


def sections(page: str) -> dict[str, str]:
    """Each heading's anchor and the text under it, up to the next heading of any level."""
    parts = re.split(r'<h[1-6][^>]*\bid="([^"]+)"[^>]*>', page)
    found: dict[str, str] = {}
    for anchor, body in zip(parts[1::2], parts[2::2], strict=True):
        found[anchor] = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return found


def walk(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None = None
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    """Every visible command of the CLI with its context, as ``evopolicy`` itself finds them."""
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    yield path, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name), ctx)


def missing_from(page: str) -> list[str]:
    """What of the CLI the rendered page lacks: commands, options, arguments."""
    from evopolicygym.cli.group import main

    found = sections(page)
    missing: list[str] = []
    for path, ctx in walk(main, (PROG,)):
        shown = " ".join(path)
        text = found.get("-".join(path))
        if text is None:
            missing.append(f"command `{shown}`")
            continue
        for param in ctx.command.get_params(ctx):
            if isinstance(param, click.Option):
                if param.hidden:
                    continue
                for spelling in (*param.opts, *param.secondary_opts):
                    if not re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text):
                        missing.append(f"option {spelling} of `{shown}`")
            elif isinstance(param, click.Argument) and param.human_readable_name not in text:
                missing.append(f"argument {param.human_readable_name} of `{shown}`")
    return missing


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    _require_docs_group()
    page = rendered_page()
    missing = missing_from(page)
    assert not missing, "docs/reference/cli.md lacks:\n" + "\n".join(missing)
    # The lazy groups' subcommands (loaded only when named) are there too.
    assert 'id="evopolicy-experiment-summary"' in page
    assert 'id="evopolicy-record-verify"' in page


def test_a_missing_command_or_option_is_found() -> None:
    """The check itself: the page with one option's spellings, or one command, taken out."""
    _require_docs_group()
    page = rendered_page()
    without_option = page.replace("--anchor", "--removed")
    assert "option --anchor of `evopolicy record verify`" in missing_from(without_option)
    without_command = page.replace('id="evopolicy-record-head"', 'id="gone"')
    assert "command `evopolicy record head`" in missing_from(without_command)
