"""``evopolicy agents``: the Agent providers a Run can use, and whether they are installed."""

from __future__ import annotations

import os
import shutil
from typing import Any

import click
from rich.console import Console

from evopolicygym.agents.providers import PROVIDERS, kimi_flavour
from evopolicygym.cli.errors import Cli
from evopolicygym.cli.output import emit_json, print_table

__all__ = ["agents"]


@click.group(cls=Cli, short_help="The Agent providers.")
def agents() -> None:
    """The Agent providers `evopolicy run --agent` takes."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def list_agents(as_json: bool) -> None:
    """Each provider: what it runs, the options it takes, and whether its CLI is on PATH."""
    rows: list[dict[str, Any]] = []
    for provider in PROVIDERS.values():
        found = provider.executable is None or shutil.which(provider.executable) is not None
        # kimi is two CLIs under one name with other flags: say which one the Run would use
        flavour = kimi_flavour(dict(os.environ)) if provider.name == "kimi" and found else None
        options = [
            flag for flag, ok in (("--model", provider.model), ("--effort", provider.effort)) if ok
        ]
        inherits = list(provider.env)
        if provider.name == "chat":
            options += ["--base-url", "--api-key-env"]
            inherits.append("OPENAI_API_KEY (or --api-key-env)")
        if provider.name == "command":
            options.append("--agent-command")
        rows.append(
            {
                "name": provider.name,
                "description": provider.description,
                "executable": provider.executable,
                "installed": found,
                "flavour": flavour,
                "options": options,
                "inherits": inherits,
                "transcript": provider.stream,
            }
        )
    if as_json:
        emit_json(rows)
        return
    # Names one types (the agent, its options, the variables it inherits) are never broken:
    # the description wraps, or each agent gets a block of its own when that does not fit.
    print_table(
        Console(),
        ["agent", "runs", "installed", "options", "inherits"],
        [
            [
                row["name"],
                row["description"],
                (f"yes ({row['flavour']})" if row["flavour"] else "yes")
                if row["installed"]
                else f"no ({row['executable']} not on PATH)",
                "\n".join(row["options"]) or "-",
                "\n".join(row["inherits"]) or "-",
            ]
            for row in rows
        ],
        keys=(0, 3, 4),
    )
