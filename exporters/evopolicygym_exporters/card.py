"""The dataset card (README.md): Hub metadata, one config per format, and how rows were made."""

from __future__ import annotations

from typing import Any

import yaml

from evopolicygym_exporters.writer import SPLITS

__all__ = ["render_card"]

_TAGS = ["evopolicygym", "agents", "code", "program-synthesis", "reinforcement-learning"]


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()


# Every label the configs carry, one sentence each, as the Run rules define them.
LABELS = """\
- `handoff`: who named the candidates the Host validated: `agent` (the Agent's accepted
  `finish`), `host` (the Host nominated the best published Submissions after the Agent
  exited without a finish, which a Run does only when asked to) or `none` (nobody, so
  the Run has no final program).
- `reference_score`: the initial program's score on the same hidden Validation Episodes
  as the candidates, measured as a reference that is never selectable, and so the
  task's difficulty (in `rl` the mean over the task's Runs that measured it, of which
  there are `reference_score_runs`).
- `task_catalog` (`sft`, `rl`): the Benchmark's catalog entry as recorded: its `family`,
  the difficulty `profile` the Run was given and its rank `difficulty` (0 = easiest), and
  `reference_baseline` / `reference_random`, the family's baseline program and a
  uniform-random policy measured on the assessment split (normalize a score as
  `(score - reference_random) / (reference_baseline - reference_random)`); null fields
  where the Benchmark declares none.
- `improved`: whether the final program's Validation score beats `reference_score` in
  the Benchmark's direction on the same Episodes (null where that was not measured: no
  final program, no Validation, or a Run recorded before the initial program was
  validated).
- `success`: true when the Run finished, the Agent handed off (`handoff` is `agent`)
  and `improved` is true, and false otherwise (Runs recorded before the initial program
  was validated included).
- `final_score`: the final program's score on held-out Assessment Episodes, measured
  once and never used to select.
- `best_train_score`: the best published train score of the Run's Submissions, which
  ran on different Episodes, so it is unmatched evidence: a reference point, not a
  comparison.
- `best_known_score` (`rl`): the best published train score over every Run of the
  task, unmatched evidence as well.
- `parent_digest`: the program an edit started from: the one the Agent named when it
  submitted (`evopolicy session submit --parent ID`), else the one it most likely
  started from, that is, of the initial program and every earlier Submission's program
  the one with the smallest diff to it (lines added plus lines removed), ties going to
  the most recent.
- `parent_basis`: `stated` when the Agent named the parent, `nearest` when it is the
  smallest diff.
- `parent_submission_id`: the parent's Submission, null when the parent is the initial
  program (`previous_submission_id` and `previous_program_digest` name the previous
  Submission instead, which is what the Host records as the parent).
- `parent_distance`: the lines added plus lines removed from the parent, over which
  `diff` and `edit_kind` are taken.
- `matched_indices`: the pool indices both the Submission and its parent were evaluated
  on, where a comparison is matched (identical Episodes); empty when there are none.
- `matched_score`: the Submission's score on `matched_indices` (its published score
  when both ran on the same indices, else its mean per-Episode score there, a failed
  Episode at the Benchmark's failure score), null where no index is shared or the
  Benchmark's score is not such a mean.
- `parent_matched_score`: the parent's score on `matched_indices`, taken the same way.
- `matched_delta`: `matched_score - parent_matched_score`, raw (lower is better when the
  direction is `minimize`).
- `matched_better`: whether the Submission beats its parent on `matched_indices` in the
  Benchmark's direction (null where there is no matched comparison).
- `best_so_far` (`programs`): whether the Submission's published train score beats
  every earlier one of its Run, on whatever indices each ran.
- `best_so_far_basis`: what `best_so_far` compared: `first` (nothing earlier), `matched`
  (every earlier published Submission ran on the same indices) or `unmatched` (some did
  not, so the comparison is not like for like).
- `best_so_far_matched`: whether the Submission beats every earlier published
  Submission it shares indices with, each on the shared indices (null when it shares
  none with any).
- `matched` (`dpo`): always true, because `chosen` and `rejected` were evaluated on the
  same pool indices (`indices`).
- `margin` (`dpo`): the difference between the chosen and the rejected program's train
  scores on those indices.
- `submissions` (`sft`, `distill`): per-Submission outcome labels for process
  supervision (score, failures, `budget_spent`, `budget_used`, parent and the matched
  comparison with it), each with the `turn` that asked for it: on a whole row every
  Submission of the attempt, on a `--per-turn` row those of its own turn (null for a turn
  that made none).
- `turn`: the attempt's assistant turn, counted from 0, that asked for a Submission,
  which is what `--per-turn` rows (and `programs` rows, with `attempt`) join on.
- `budget_spent`: the Episodes the Submission was charged.
- `budget_used`: the Run's Episodes charged so far, this Submission's included.
- `tools_inferred`: whether `tools` was told from the conversation's calls instead of
  recorded as the tools the Agent was offered.
- `responses`: per assistant turn (`turn`), the `model` that gave it and its tokens
  (`input_tokens`, of them `cached_tokens` and `cache_write_tokens`; `output_tokens`, of
  them `reasoning_tokens`), null where the Agent's record tells none.
- `agent_errors`: the errors the Agent's CLI reported in the attempt (`kind`, HTTP
  `status` where given, `message`): API errors, failed logins, messages the CLI made up
  itself. They are never turns of the conversation.
- `trainer_step` (`sft`, `distill`, `programs`): the trainer's step a training Run was
  made at (a Run a model worked through the training environment: agent provider
  `trainer`, its `agent.options` holding the step and the `rl_tools` row's `task_id`),
  where the trainer told it; null for every other Run.
- `redacted`: whether the row holds a redacted secret.
"""

# What a trainer does with `rl_tools` (in the card only when that config is exported).
TRAINING = """## Training in the loop (`rl_tools`)

`rl_tools` rows are `rl`'s with the task text in tool form: the system message tells the
model to work by calling the tools `list_files()`, `read_file(path)`,
`write_file(path, content)`, `submit(episodes)` and `finish(candidates)` instead of running
`./evopolicy session` commands, and the user message is the kickoff with the initial
program. They are the `train_dataset` of a trainer that runs each rollout as a live Run:

```python
from functools import partial
from datasets import load_dataset
from trl import GRPOTrainer
from evopolicygym.training import PolicyEvolutionEnv

trainer = GRPOTrainer(
    model=...,
    train_dataset=load_dataset("path/or/repo", "rl_tools", split="train"),
    environment_factory=partial(PolicyEvolutionEnv, store="evopolicy-store"),
)
```

`PolicyEvolutionEnv.reset(**row)` starts one Run of the row's task under a CLI Run's
rules (agent provider `trainer`); its `get_reward()` is the held-out Assessment of the
program the Run selected, normalized against the initial program and a uniform-random
policy: `clip(d * (A - I) / max(|I - R|, 1e-9), -1, 1)`, where A is the selected
program's Assessment score, I the initial program's and R a uniform-random policy's on
the same Assessment Episodes, and d is 1 when the Benchmark maximizes and -1 when it
minimizes (so 1 is at least as far past the initial program as the initial program is
past random, 0 as good as the initial program). A rollout whose model handed nothing off
(no accepted `finish`, so the Run selected nothing) gets -1, and NaN (which the trainer
leaves out) means the Host failed, not the model. The Runs it
records export like any other, with `trainer_step` set: `evopolicy export
--trainer-step FIRST:STOP` keeps a range of steps and `--agent MODEL` one model.
"""


def _units(config: dict[str, Any]) -> str:
    groups, units = config.get("split_groups"), config.get("split_units")
    if groups is None or units is None:
        return ""
    return f" ({groups} groups, {units} once those sharing an identical row are joined)"


def render_card(manifest: dict[str, Any], license_id: str) -> str:
    """The README for the configs in ``manifest`` (deterministic: no dates, sorted configs)."""
    configs = manifest["configs"]
    names = sorted(configs)
    # What load_dataset can load: configs and splits with rows (an empty one is refused).
    present = {name: [s for s in SPLITS if configs[name]["splits"][s]["rows"]] for name in names}
    loadable = [name for name in names if present[name]]
    header = _header(configs, present, loadable, license_id)
    body = _body(configs, names, loadable)
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n" + body


def _header(
    configs: dict[str, Any], present: dict[str, list[str]], loadable: list[str], license_id: str
) -> dict[str, Any]:
    """The Hub metadata: configs and splits with data files, their features and sizes."""
    categories = sorted({c for config in configs.values() for c in config["task_categories"]})
    return {
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


def _body(configs: dict[str, Any], names: list[str], loadable: list[str]) -> str:
    """The card's Markdown: configs, how to load them, how rows were made, the labels."""
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
        f"{c['test_fraction']:g} of split keys in `test`, grouped by {c.get('split_by', 'run')}"
        f"{_units(c)}."
        for name, c in ((name, configs[name]) for name in names)
    )
    training = "\n" + TRAINING if "rl_tools" in names else ""
    return f"""# EvoPolicyGym recorded Runs

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
- Splits are fixed by hashing, never drawn by row. By default rows are grouped by
  task (the Benchmark, its parameters and environment digest, the initial program,
  the train split and the budget and limits: `task_id`), so all rows of a task are
  in one split; an export made with `--split-by run` groups by Run instead (`rl`
  rows are tasks either way). Within a config, identical rows never straddle splits
  whatever the grouping: the same program (`programs`), the same two programs
  (`dpo`, whichever was chosen), the same conversation or turn (`sft`, `distill`:
  the training columns), the same Episode (`rollouts`). Groups that share such a
  row form one unit, whose split is the one most of its groups hash to (ties: its
  least group key's).
- Held out: no validation or assessment seed, Episode, per-Episode result or
  feedback content is in any column; `final_score` (`sft`, `distill`) is the
  assessment score of the Run's final program and `reference_score` the initial
  program's Validation score, labels beside the training columns, never in them
  (`events` holds the selected program's Validation and Assessment scores and the
  initial program's, not other candidates'). No Episode
  seed or scenario is either; the train pool's seed, from which its Episodes
  follow, is in `rl`'s reward columns only, never in a prompt.
- Redaction: every text of every row but `rollouts` (program files, diffs,
  `chosen`/`rejected` edits, tool arguments, messages, event payloads) passes the
  redactor the agents' transcripts pass when they are recorded: secrets of known
  shapes (API keys, tokens, private keys, credentials in URLs and assignments)
  become `[REDACTED]`. The store keeps programs as submitted, so a digest names the
  program as submitted, and a redacted row's files may not hash to it. `redacted`
  is true for a row holding a redaction, made here or when it was recorded.
- Transcripts open with the Host's task as the system message; where the agent's
  transcript had no user turn, a fixed one is added: tool calls carry their
  arguments as JSON objects, and `tools` lists the tools the Agent was offered, as
  recorded when it started (exact for the built-in agents); where none were recorded
  (CLI agents) it lists the tools the conversation calls, schemas inferred from the
  calls, and `tools_inferred` is true. Every message
  has every key, null when unused; for chat templates that test whether a key
  is present, drop the nulls: `[{{k: v for k, v in m.items() if v is not None}}
  for m in messages]`.
- Per config:
{provenance}
- A config or split with no rows is listed above but has no data files.
{training}
## Labels

{LABELS}"""
