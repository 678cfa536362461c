"""The page around the report's sections: one HTML document with its styles, its script
and plotly.js inlined, so the file opens anywhere, offline, with nothing beside it.

Every text that comes from the record reaches the page through ``esc`` (or a table cell,
which escapes): transcripts and programs may hold anything, markup included.
"""

from __future__ import annotations

import html
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Markup", "Section", "esc", "fmt", "page", "plain", "table"]


def esc(value: object) -> str:
    """``value`` as text, escaped for an element's content or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def plain(value: object) -> Any:
    """A data frame's cell as a plain value: NA and NaN as None, NumPy scalars as Python's."""
    pandas = sys.modules.get("pandas")  # a value is pandas' NA only where pandas is loaded
    if value is None or (pandas is not None and value is pandas.NA):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def fmt(value: object, digits: int = 4) -> str:
    """A cell's text: numbers to ``digits`` significant figures, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{digits}g}"
    return str(value)


class Markup(str):
    """Markup made here (already escaped), passed through ``table`` unchanged."""


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, cls: str = "") -> str:
    """An HTML table; each cell escaped (a cell given as ``Markup`` is kept as it is)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{c if isinstance(c, Markup) else esc(fmt(c))}</td>" for c in row)
        + "</tr>"
        for row in rows
    )
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


@dataclass(frozen=True)
class Section:
    """One titled part of the page; ``anchor`` is its id for the table of contents."""

    anchor: str
    title: str
    body: str  # markup


_STYLE = """
:root { color-scheme: light; --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#fafbfc;
  --add:#e6f6e9; --del:#fbe9ea; --hunk:#eef2fb; --bad:#b3261e; --good:#1b7a3a; }
* { box-sizing: border-box; }
.videos { display:flex; flex-wrap:wrap; gap:12px; }
.videos figure { margin:0; } .videos figcaption { color:var(--muted); font-size:12px; }
.videos video, .videos img { width:320px; image-rendering:pixelated; border:1px solid var(--line); }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--fg); background:#fff; }
header.top { padding:16px 24px; border-bottom:1px solid var(--line); background:var(--bg); }
header.top h1 { margin:0 0 4px; font-size:20px; }
header.top .sub { color:var(--muted); }
nav.toc { padding:8px 24px; border-bottom:1px solid var(--line); position:sticky; top:0;
  background:#fff; z-index:5; }
nav.toc a { margin-right:14px; color:#2653a6; text-decoration:none; white-space:nowrap; }
main { padding:8px 24px 48px; max-width:1400px; }
section { margin:24px 0; }
section > h2 { font-size:17px; border-bottom:1px solid var(--line); padding-bottom:4px; }
table { border-collapse:collapse; margin:8px 0; font-size:13px; }
th, td { border:1px solid var(--line); padding:3px 8px; text-align:left; vertical-align:top; }
th { background:var(--bg); }
td { font-variant-numeric: tabular-nums; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 16px; margin:8px 0; }
dl.facts dt { color:var(--muted); }
dl.facts dd { margin:0; }
.bad { color:var(--bad); } .good { color:var(--good); } .muted { color:var(--muted); }
.plot { width:100%; min-height:340px; }
pre { background:var(--bg); border:1px solid var(--line); padding:8px; overflow:auto;
  white-space:pre-wrap; word-break:break-word;
  font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace; }
pre.diff { white-space:pre; max-height:640px; }
pre.diff .a { background:var(--add); display:block; }
pre.diff .d { background:var(--del); display:block; }
pre.diff .h { background:var(--hunk); display:block; color:var(--muted); }
.msg { border:1px solid var(--line); border-radius:6px; margin:8px 0; padding:6px 10px; }
.msg .role { font-weight:600; text-transform:uppercase; font-size:11px; letter-spacing:.04em;
  color:var(--muted); }
.msg.assistant { background:#f5f8ff; } .msg.tool { background:#fbfbf5; }
.msg.error { background:var(--del); }
.msg pre { margin:4px 0; }
.usage { color:var(--muted); font-size:12px; }
details > summary { cursor:pointer; color:var(--muted); }
select { font:inherit; padding:2px 4px; }
.note { color:var(--muted); font-size:12px; }
"""

# The diff viewer: one pre-rendered diff per Submission, the select shows one of them.
_SCRIPT = """
document.querySelectorAll('select[data-diffs]').forEach(function (select) {
  var box = document.getElementById(select.getAttribute('data-diffs'));
  function show() {
    box.querySelectorAll('[data-diff]').forEach(function (pre) {
      pre.hidden = pre.getAttribute('data-diff') !== select.value;
    });
  }
  select.addEventListener('change', show);
  show();
});
"""


def page(title: str, subtitle: str, sections: Sequence[Section], plotly_js: str | None) -> str:
    """The whole document. ``plotly_js`` (the library's source) is inlined once, before any
    figure's script; None when the page has no figure."""
    toc = "".join(f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(
        f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in sections
    )
    # The library's source never holds "</script>" (it would end the element early).
    library = f'<script type="text/javascript">{plotly_js}</script>' if plotly_js else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_STYLE}</style>{library}</head><body>"
        f'<header class="top"><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div></header>'
        f'<nav class="toc">{toc}</nav><main>{body}</main>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
