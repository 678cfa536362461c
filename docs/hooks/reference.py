"""MkDocs hook: the reference pages that are generated from the code, so they cannot drift.

- ``cli``: the ``evopolicy`` click group with every subcommand loaded, for the
  ``::: mkdocs-click`` directive of reference/cli.md. The group loads its subcommands lazily
  (``evopolicygym.cli.group``), and so does ``experiment`` (its ``summary`` lives in another
  module); mkdocs-click lists a group's ``commands`` mapping when it has one, so it would miss
  those. ``loaded(command)`` copies each command with its help text as Markdown (click's
  ``\\b`` paragraphs, the examples and exit statuses, as text blocks), and each group with a
  ``commands`` mapping of what its ``list_commands``/``get_command`` give: the commands
  ``evopolicy`` runs, options and all. ``tests/test_docs_cli_reference.py`` checks every
  command and option is in the page.
- ``<!-- reference: datasets -->``: each export config's columns and their types, from the
  exporters' own ``datasets.Features``.
- ``<!-- reference: events -->``: each event type's payload fields, from the JSON Schemas
  checked in under ``schemas/events/`` (generated from the event structs; a test fails on
  drift).
- ``<!-- reference: experiment-spec -->``: the experiment spec's fields, from
  ``schemas/experiment-spec.json``.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
MODULE = "evopolicy_docs_reference"  # the name the mkdocs-click directive imports

sys.modules.setdefault(MODULE, sys.modules[__name__])


def markdown_help(text: str) -> str:
    """Click help text as Markdown: a paragraph click keeps as written (``\\b``: examples,
    exit statuses) becomes a ``text`` block; elsewhere ``<`` outside code spans is escaped, so
    ``run-<id>`` is not read as HTML."""
    out = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b\n"):
            out.append("```text\n" + paragraph[2:] + "\n```")
            continue
        parts = paragraph.split("`")
        parts[::2] = [part.replace("<", "&lt;") for part in parts[::2]]
        out.append("`".join(parts))
    return "\n\n".join(out)


def loaded(command: click.Command, parent: click.Context | None = None) -> click.Command:
    """A copy of ``command`` with its help as Markdown, and for a group, whose ``commands``
    holds every subcommand it lists."""
    clone = copy.copy(command)
    if command.help:
        clone.help = markdown_help(command.help)
    if not isinstance(command, click.Group):
        return clone
    ctx = click.Context(command, info_name=command.name, parent=parent)
    subcommands: dict[str, click.Command] = {}
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None:
            subcommands[name] = loaded(sub, ctx)
    clone.commands = subcommands
    return clone


def _cli() -> click.Command:
    from evopolicygym.cli.group import main

    return loaded(main)


def __getattr__(name: str) -> Any:
    if name == "cli":  # loaded when the directive asks, not when MkDocs reads its config
        return _cli()
    raise AttributeError(name)


# --------------------------------------------------------------------------- datasets


def _struct_names() -> list[tuple[str, Any]]:
    """The structs several configs share, by the name the tables give them."""
    from evopolicygym_exporters.chat import AGENT, MESSAGE, TOOL_CALL
    from evopolicygym_exporters.programs import PROGRAM_FILES
    from evopolicygym_exporters.sft import AGENT_ERROR, RESPONSE, SUBMISSION_OUTCOME
    from evopolicygym_exporters.tasks import CATALOG

    return [
        ("message", MESSAGE),
        ("tool_call", TOOL_CALL),
        ("agent", AGENT),
        ("file", PROGRAM_FILES.feature),
        ("response", RESPONSE),
        ("submission_outcome", SUBMISSION_OUTCOME),
        ("agent_error", AGENT_ERROR),
        ("task_catalog", CATALOG),
    ]


def _type(feature: Any, names: list[tuple[str, Any]]) -> str:
    """A feature as a short type: ``string``, ``list[message]``, ``{a: int32, b: json}``."""
    from datasets import List, Sequence, Value

    for name, struct in names:
        if feature == struct:
            return name
    if isinstance(feature, Value):
        return str(feature.dtype)
    if isinstance(feature, List | Sequence):
        return f"list[{_type(feature.feature, names)}]"
    if isinstance(feature, dict):
        fields = ", ".join(f"{k}: {_type(v, names)}" for k, v in feature.items())
        return "{" + fields + "}"
    return type(feature).__name__.lower()  # Json


def _columns_table(features: Any, names: list[tuple[str, Any]]) -> list[str]:
    lines = ["| column | type |", "| --- | --- |"]
    lines += [f"| `{column}` | `{_type(f, names)}` |" for column, f in features.items()]
    return lines


def datasets_reference() -> str:
    """Per config: its one-line summary and its columns; then the shared structs."""
    from evopolicygym_exporters.base import ExportOptions
    from evopolicygym_exporters.registry import load_exporters

    names = _struct_names()
    out: list[str] = []
    for name, cls in sorted(load_exporters().items()):
        out += [f"### `{name}`", "", f"One row is {cls.summary}.", ""]
        out += _columns_table(cls(None, ExportOptions()).features(), names)  # type: ignore[arg-type]
        if name in ("sft", "distill"):
            per_turn = cls(None, ExportOptions(per_turn=True)).features()  # type: ignore[arg-type]
            out += ["", f"With `--per-turn`, `{name}` has `prompt`, `completion` and `turn` "]
            out[-1] += f"instead of `messages`: {', '.join(f'`{c}`' for c in per_turn)}."
        out.append("")
    out += ["### Shared structs", ""]
    for name, struct in names:
        fields = struct if isinstance(struct, dict) else {}
        shown = ", ".join(f"`{k}`: `{_type(v, names)}`" for k, v in fields.items())
        out.append(f"- `{name}`: {shown}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- JSON Schemas


def _schema_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " \\| ".join(_schema_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array" and "items" in prop:
        return f"array of {_schema_type(prop['items'])}"
    if kind == "object" and "additionalProperties" in prop:
        extra = prop["additionalProperties"]
        return f"object of {_schema_type(extra)}" if isinstance(extra, dict) else "object"
    return " \\| ".join(kind) if isinstance(kind, list) else str(kind)


def _schema_table(definition: dict[str, Any]) -> list[str]:
    required = set(definition.get("required", ()))
    lines = ["| field | type | required | default |", "| --- | --- | --- | --- |"]
    for field, prop in definition.get("properties", {}).items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        need = "yes" if field in required else ""
        lines.append(f"| `{field}` | {_schema_type(prop)} | {need} | {default} |")
    return lines


def _schema_section(schema: dict[str, Any], title: str, level: str) -> list[str]:
    """One schema: its own struct's table, then each struct it refers to."""
    defs = schema.get("$defs", {})
    version = schema.get("x-schema-version")
    out = [f"{level} `{title}`", ""]
    if version is not None:
        out += [f"Schema version {version}.", ""]
    out += _schema_table(defs.get(title, schema))
    for name, definition in sorted(defs.items()):
        if name != title:
            out += ["", f"`{name}` (in `{title}`):", "", *_schema_table(definition)]
    return [*out, ""]


def events_reference() -> str:
    """Each event type's payload; its struct's docstring where it has one."""
    from evopolicygym.records.events import EVENT_TYPES

    paths = {path.stem: path for path in (ROOT / "schemas" / "events").glob("*.json")}
    if set(paths) != set(EVENT_TYPES):  # the schema drift test says how to regenerate them
        raise ValueError(
            f"schemas/events/ and the event types differ: {set(paths) ^ set(EVENT_TYPES)}"
        )
    out: list[str] = []
    for name in sorted(paths):
        section = _schema_section(json.loads(paths[name].read_text(encoding="utf-8")), name, "###")
        doc = " ".join((EVENT_TYPES[name].__doc__ or "").split())
        out += [*section[:2], *([doc, ""] if doc else []), *section[2:]]
    return "\n".join(out)


def experiment_spec_reference() -> str:
    schema = json.loads((ROOT / "schemas" / "experiment-spec.json").read_text(encoding="utf-8"))
    title = schema.get("$ref", "").rsplit("/", 1)[-1] or schema["title"]
    return "\n".join(_schema_section(schema, title, "###"))


_GENERATED = {
    "<!-- reference: datasets -->": datasets_reference,
    "<!-- reference: events -->": events_reference,
    "<!-- reference: experiment-spec -->": experiment_spec_reference,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, make in _GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
