"""The dataset card (README.md): Hub metadata, one config per format, and how rows were made."""

from __future__ import annotations

from typing import Any

import yaml

from evopolicygym_exporters.writer import SPLITS

__all__ = ["render_card"]

_TAGS = ["evopolicygym", "agents", "code", "program-synthesis", "reinforcement-learning"]


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()


def render_card(manifest: dict[str, Any], license_id: str) -> str:
    """The README for the configs in ``manifest`` (deterministic: no dates, sorted configs)."""
    configs = manifest["configs"]
    names = sorted(configs)
    # What load_dataset can load: configs and splits with rows (an empty one is refused).
    present = {name: [s for s in SPLITS if configs[name]["splits"][s]["rows"]] for name in names}
    loadable = [name for name in names if present[name]]
    categories = sorted({c for name in names for c in configs[name]["task_categories"]})
    header = {
        "license": license_id,
        "task_categories": categories,
        "tags": _TAGS,
        "pretty_name": "EvoPolicyGym recorded Runs",
        "configs": [
            {
                "config_name": name,
                "data_files": [
                    {"split": split, "path": f"{name}/{split}-*-{configs[name]['tag']}.parquet"}
                    for split in present[name]
                ],
            }
            for name in loadable
        ],
        "dataset_info": [
            {
                "config_name": name,
                "features": configs[name]["features"],
                "splits": [
                    {
                        "name": split,
                        "num_bytes": configs[name]["splits"][split]["bytes"],
                        "num_examples": configs[name]["splits"][split]["rows"],
                    }
                    for split in present[name]
                ],
            }
            for name in loadable
        ],
    }
    rows = "\n".join(
        f"| `{name}` | {configs[name]['summary']} | "
        f"{configs[name]['splits']['train']['rows']} | {configs[name]['splits']['test']['rows']} |"
        for name in names
    )
    loads = "\n".join(f'ds = load_dataset("path/or/repo", "{name}")' for name in loadable)
    provenance = "\n".join(
        f"- `{name}` (exporter v{c['exporter_version']}): the log up to position "
        f"{c['store_head']} (head hash `{c['store_hash'] or 'none'}`); Run filter "
        f"{_flow(c['filter'])}; settings {_flow(c['settings'])}; "
        f"{c['test_fraction']:g} of keys in `test`."
        for name, c in ((name, configs[name]) for name in names)
    )
    body = f"""# EvoPolicyGym recorded Runs

Each Run gave a coding agent a policy program to improve under a fixed Episode
budget, with bounded feedback from train Episodes; the Host then selected among
the agent's candidates on hidden validation Episodes and measured the selected
program once on held-out assessment Episodes. These records were exported from
the Runs' event log by `evopolicy export`.

| config | one row is | train | test |
| --- | --- | --- | --- |
{rows}

```python
from datasets import load_dataset
{loads}
```

## How the records were produced and filtered

- Only Runs that had finished by the log position named below are included.
- Splits: a row's split is fixed by hashing its Run id (its task id for `rl`),
  never by row: all rows of one Run (or task) are in one split.
- Held out: no validation or assessment seed, Episode, per-Episode result or
  feedback content is in any column; `final_score` (`sft`, `distill`) is the
  assessment score of the Run's final program, an outcome label. No Episode
  seed or scenario is either; the train pool's seed, from which its Episodes
  follow, is in `rl`'s reward columns only, never in a prompt.
- Transcripts open with the Host's task as the system message; where the agent's
  transcript had no user turn, a fixed one is added: tool calls carry their
  arguments as JSON objects, and `tools` lists what the conversation calls
  (schemas inferred from the calls for tools of unknown agents). Every message
  has every key, null when unused; for chat templates that test whether a key
  is present, drop the nulls: `[{{k: v for k, v in m.items() if v is not None}}
  for m in messages]`.
- Per config:
{provenance}
- A config or split with no rows is listed above but has no data files.
"""
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n" + body
