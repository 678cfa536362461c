"""Interop: an export is what the Hugging Face and TRL tooling expects, offline.

Every config loads with ``datasets.load_dataset(DIR, CONFIG)`` with the rows the
export reported and exactly the exporter's features; TRL's dataset helpers take
the ``sft`` (whole and per-turn), ``dpo`` and ``rl`` rows as conversations and
render them through a chat template (of a tiny tokenizer built here: nothing is
downloaded); exporting the same log again gives the same bytes; and the shards
of one config share one schema. The network is closed for the whole module.
"""

from __future__ import annotations

import random
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub.constants
import pyarrow.parquet as pq
import pytest

from evopolicygym.records import open_store
from evopolicygym.records.location import Store
from evopolicygym.transcript import AgentIdentity
from evopolicygym_exporters import EXPORTERS, MANIFEST, ExportOptions, ExportReport, export
from tests.support.requires import require_group
from tests.support.runlogs import Planned, SynthRun, policy_source, write_run

OPTIONS = ExportOptions(test_fraction=0.5)
PER_TURN = ExportOptions(test_fraction=0.5, per_turn=True)
PER_TURN_FORMATS = ["sft", "distill"]
TASK_HEADING = "# Task: evolve a policy for"
CLAUDE = AgentIdentity(
    name="claude-code", provider="anthropic", model="claude-test", options={"effort": "low"}
)


# --- offline: no hub, no shared cache, no socket ------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Hub access off (environment and the libraries' already-read settings), every cache in
    this module's own directory, and any connection attempt an error."""
    home = tmp_path_factory.mktemp("hf-home")
    cache = home / "datasets"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(home),
            "HF_DATASETS_CACHE": str(cache),
        }.items():
            patch.setenv(name, value)
        patch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        patch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"network access attempted: {args!r}")

        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse)
        patch.setattr(socket, "create_connection", refuse)
        yield cache


def load(directory: Path, config: str, cache: Path) -> datasets.DatasetDict:
    loaded = datasets.load_dataset(str(directory), config, cache_dir=str(cache))
    assert isinstance(loaded, datasets.DatasetDict)
    return loaded


# --- the recorded Runs --------------------------------------------------------------------


def _runs() -> list[SynthRun]:
    """Eight Runs over three Benchmarks (three rl tasks, split by task), two agents, both
    score directions: each has several Submissions on the same indices (dpo pairs), one
    elsewhere, one failed. A task's programs and Episodes are its own, so no identical
    row joins two tasks into one split."""
    runs = []
    for i in range(8):
        direction = "minimize" if i == 5 else "maximize"
        task = i % 3
        offset = 10.0 * task
        submissions = [
            Planned(
                {"policy.py": policy_source(gain + offset)},
                [0, 1, 2],
                [gain + i + offset, gain * 2 + offset, gain + offset],
            )
            for gain in (0.5, 1.5, 2.5)
        ]
        submissions.append(
            Planned(
                {"policy.py": policy_source(9.0 + offset, structural=True)},
                [3, 4],
                [1.0 + offset, 2.0 + offset],
            )
        )
        if i % 2:
            submissions.append(
                Planned({"policy.py": policy_source(4.0 + offset)}, [5], None)
            )  # failed
            submissions.append(
                Planned(
                    {"policy.py": policy_source(3.5 + offset), "helpers.py": "SCALE = 2\n"},
                    [0, 1, 2],
                    [7.0 + offset] * 3,
                )
            )
        runs.append(
            SynthRun(
                run_id=f"interop-{i:02d}",
                submissions=submissions,
                benchmark_id=f"toy-{task}",
                agent=CLAUDE
                if i % 4 == 1
                else AgentIdentity(name="reference", provider="reference"),
                direction=direction,
                candidates=[1, 2],
                chatter=1 + i % 2,
            )
        )
    return runs


class Exported:
    def __init__(self, store: Store, root: Path) -> None:
        self.store = store
        self.root = root
        self.out = root / "out"
        self.report: ExportReport = export(store, list(EXPORTERS), self.out, OPTIONS)
        self.per_turn_out = root / "per-turn"
        self.per_turn_report: ExportReport = export(
            store, PER_TURN_FORMATS, self.per_turn_out, PER_TURN
        )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    root = tmp_path_factory.mktemp("interop")
    with open_store(root / "store", create=True) as store:
        for run in _runs():
            write_run(store, run)
        yield Exported(store, root)


@pytest.fixture(scope="module")
def cache(offline: Path) -> Path:
    return offline


@pytest.fixture(scope="module")
def loaded(exported: Exported, cache: Path) -> dict[str, datasets.DatasetDict]:
    """Every config of both exports as loaded; ``sft@per-turn`` and ``distill@per-turn`` the
    per-turn ones."""
    result = {name: load(exported.out, name, cache) for name in EXPORTERS}
    for name in PER_TURN_FORMATS:
        result[f"{name}@per-turn"] = load(exported.per_turn_out, name, cache)
    return result


# --- a tiny tokenizer with a tool-calling chat template, built here -----------------------

# Whitespace only from expressions: transformers renders with trim_blocks and lstrip_blocks.
CHAT_TEMPLATE = (
    "{% if tools %}<|tools|>{{ '\\n' }}"
    "{% for tool in tools %}{{ tool.function.name }}: "
    "{{ tool.function.parameters | tojson }}{{ '\\n' }}{% endfor %}"
    "<|end|>{{ '\\n' }}"
    "{% endif %}"
    "{% for message in messages %}<|{{ message.role }}|>"
    "{% if message.role == 'tool' %}[{{ message.name }}] {% endif %}"
    "{% if message.content %}{{ message.content }}{% endif %}"
    "{% for tool_call in message.tool_calls or [] %}"
    "<|call|>{{ tool_call.function.name }} {{ tool_call.function.arguments | tojson }}"
    "{% endfor %}<|end|>{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = [
    "[UNK]",
    "[PAD]",
    "<|end|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|call|>",
    "<|tools|>",
]
WORDS = [
    "#",
    "Task:",
    "evolve",
    "a",
    "policy",
    "for",
    "Improve",
    "Budget",
    "Episodes.",
    "Submitting.",
    "ok",
]


@pytest.fixture(scope="module")
def trl() -> Any:
    """``trl.data_utils``: the interop group (TRL, transformers, tokenizers) is not in the
    default install; without it the TRL tests skip and the datasets tests still run."""
    require_group("interop", "trl", "transformers", "tokenizers")
    import trl.data_utils

    return trl.data_utils


@pytest.fixture(scope="module")
def tokenizer(trl: Any) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    model = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=model,
        unk_token="[UNK]",
        eos_token="<|end|>",
        pad_token="[PAD]",
        additional_special_tokens=SPECIAL[3:],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def render(tok: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    text = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    assert isinstance(text, str)
    return text


def rows(dataset: datasets.DatasetDict) -> list[dict[str, Any]]:
    return [row for split in dataset.values() for row in split]


def chat_keys(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: row[key] for key in keys}


def test_the_tiny_tokenizer_renders_and_tokenizes_tool_calls(tokenizer: Any) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "# Task: evolve a policy"},
        {"role": "user", "content": "Improve"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "write_file", "arguments": {"path": "p"}}}
            ],
        },
        {"role": "tool", "name": "write_file", "content": "ok"},
    ]
    tools = [
        {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}
    ]
    text = render(tokenizer, messages, tools=tools, add_generation_prompt=True)
    assert text.startswith('<|tools|>\nwrite_file: {"type": "object"}\n<|end|>\n<|system|># Task:')
    assert (
        '<|assistant|><|call|>write_file {"path": "p"}<|end|>\n<|tool|>[write_file] ok<|end|>\n'
        in text
    )
    assert text.endswith("<|assistant|>")
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.convert_tokens_to_ids("<|call|>") in ids
    assert tokenizer.convert_tokens_to_ids("[UNK]") in ids  # words outside the tiny vocabulary


# --- every config loads offline ------------------------------------------------------------


@pytest.mark.parametrize("config", [*EXPORTERS, *(f"{n}@per-turn" for n in PER_TURN_FORMATS)])
def test_every_config_loads_offline_with_the_reported_rows_and_features(
    exported: Exported, loaded: dict[str, datasets.DatasetDict], config: str
) -> None:
    name, _, variant = config.partition("@")
    report, options = (
        (exported.per_turn_report, PER_TURN) if variant else (exported.report, OPTIONS)
    )
    splits = report.configs[name]["splits"]
    features = EXPORTERS[name](exported.store, options).features()
    dataset = loaded[config]
    # Both splits have rows here: the check covers the train and the test shards alike.
    assert set(dataset) == {"train", "test"}
    for split, facts in splits.items():
        assert facts["rows"] > 0
        assert dataset[split].num_rows == facts["rows"]
        assert dataset[split].features == features
        assert dataset[split].column_names == list(features)


def test_the_exported_rows_are_what_trl_needs(loaded: dict[str, datasets.DatasetDict]) -> None:
    """Json leaves come back as Python values: ``tools`` as a list of function schemas naming
    every tool the conversation calls, tool call arguments as objects (what templates read)."""
    for config in ("sft", "dpo"):
        for row in rows(loaded[config]):
            assert isinstance(row["tools"], list) and row["tools"]
            assert all(
                tool["type"] == "function" and tool["function"]["name"] for tool in row["tools"]
            )
    for row in rows(loaded["sft"]):
        calls = [
            c for m in row["messages"] if m["role"] == "assistant" for c in m["tool_calls"] or []
        ]
        assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
        assert {c["function"]["name"] for c in calls} <= {
            t["function"]["name"] for t in row["tools"]
        }


# --- TRL's helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "keys"),
    [
        ("sft", ("messages",)),
        ("sft@per-turn", ("prompt", "completion")),
        ("distill", ("messages",)),
        ("dpo", ("prompt", "chosen", "rejected")),
        ("rl", ("prompt",)),
    ],
)
def test_trl_takes_the_training_rows_as_conversations(
    trl: Any, loaded: dict[str, datasets.DatasetDict], config: str, keys: tuple[str, ...]
) -> None:
    for row in rows(loaded[config]):
        assert trl.is_conversational(row)
        for key in keys:
            assert trl.is_conversational(chat_keys(row, key))


@pytest.mark.parametrize("config", ["programs", "rollouts", "events"])
def test_the_analytics_configs_are_not_taken_for_conversations(
    trl: Any, loaded: dict[str, datasets.DatasetDict], config: str
) -> None:
    assert not trl.is_conversational(loaded[config]["train"][0])


def test_trl_renders_sft_conversations_with_their_tools(
    trl: Any, loaded: dict[str, datasets.DatasetDict], tokenizer: Any
) -> None:
    for row in rows(loaded["sft"]):
        out = trl.maybe_apply_chat_template(
            chat_keys(row, "messages"), tokenizer, tools=row["tools"]
        )
        text = out["text"]
        assert text == render(tokenizer, row["messages"], tools=row["tools"])
        assert text.startswith("<|tools|>\n")
        for tool in row["tools"]:
            assert f"{tool['function']['name']}: " in text
        assert f"<|system|>{TASK_HEADING} `{row['benchmark_id']}`" in text
        assert "<|user|>Read the task above" in text  # the kickoff user turn
        assert '<|call|>write_file {"content": "def make_policy' in text
        assert "<|call|>bash" in text and "evopolicy session submit" in text
        assert "<|tool|>[bash] " in text


def test_trl_renders_per_turn_prompts_and_completions(
    trl: Any, loaded: dict[str, datasets.DatasetDict], tokenizer: Any
) -> None:
    ends = set()
    for row in rows(loaded["sft@per-turn"]):
        out = trl.maybe_apply_chat_template(
            chat_keys(row, "prompt", "completion"), tokenizer, tools=row["tools"]
        )
        whole = render(tokenizer, row["prompt"] + row["completion"], tools=row["tools"])
        assert out["prompt"] + out["completion"] == whole
        assert TASK_HEADING in out["prompt"]
        assert TASK_HEADING not in out["completion"]
        assert out["completion"].endswith("<|end|>\n")
        last = row["prompt"][-1]["role"]
        ends.add(last)
        if last in ("user", "tool"):
            assert out["prompt"].endswith("<|assistant|>")  # the generation prompt
        completion = row["completion"][0]
        for call in completion["tool_calls"] or []:
            assert f"<|call|>{call['function']['name']} " in out["completion"]
        if completion["content"]:
            assert completion["content"].strip() in out["completion"]
    # Prompts end at a user turn, at a tool result, and at an assistant turn (continued).
    assert ends == {"user", "tool", "assistant"}


def test_trl_renders_dpo_pairs(
    trl: Any, loaded: dict[str, datasets.DatasetDict], tokenizer: Any
) -> None:
    for row in rows(loaded["dpo"]):
        example = chat_keys(row, "prompt", "chosen", "rejected")
        out = trl.maybe_apply_chat_template(example, tokenizer, tools=row["tools"])
        assert f"<|system|>{TASK_HEADING} `{row['benchmark_id']}`" in out["prompt"]
        assert out["prompt"].endswith("<|assistant|>")  # the prompt ends where the Agent acts
        assert out["chosen"] != out["rejected"]
        for side in ("chosen", "rejected"):
            assert out[side].startswith('<|call|>write_file {"content": ')
            assert out["prompt"] + out[side] == render(
                tokenizer, row["prompt"] + row[side], tools=row["tools"]
            )
            for call in row[side][0]["tool_calls"]:
                # The whole program text is in the rendered turn (as JSON).
                assert call["function"]["arguments"]["path"] in out[side]
        assert "write_file: " in out["prompt"]  # the tools header
        better = (
            row["chosen_score"] < row["rejected_score"]
            if row["score_direction"] == "minimize"
            else (row["chosen_score"] > row["rejected_score"])
        )
        assert better


def test_trl_renders_rl_prompts(
    trl: Any, loaded: dict[str, datasets.DatasetDict], tokenizer: Any
) -> None:
    for row in rows(loaded["rl"]):
        out = trl.maybe_apply_chat_template(chat_keys(row, "prompt"), tokenizer)
        assert out["prompt"].startswith(f"<|system|>{TASK_HEADING} `{row['benchmark_id']}`")
        assert "The initial program:" in out["prompt"] and "def make_policy" in out["prompt"]
        assert out["prompt"].endswith("<|assistant|>")


def _with_row_tools(example: dict[str, Any], processing_class: Any) -> dict[str, Any]:
    """What TRL's trainers do per row: the row's own ``tools`` column to the template."""
    from trl.data_utils import maybe_apply_chat_template

    return maybe_apply_chat_template(example, processing_class, tools=example.get("tools"))


@pytest.mark.parametrize(
    ("config", "columns", "rendered"),
    [
        ("sft", ["messages", "tools"], ["text"]),
        ("sft@per-turn", ["prompt", "completion", "tools"], ["prompt", "completion"]),
        ("distill@per-turn", ["prompt", "completion", "tools"], ["prompt", "completion"]),
        ("dpo", ["prompt", "chosen", "rejected", "tools"], ["prompt", "chosen", "rejected"]),
        ("rl", ["prompt"], ["prompt"]),
    ],
)
def test_trl_maps_whole_loaded_splits(
    trl: Any,
    loaded: dict[str, datasets.DatasetDict],
    tokenizer: Any,
    config: str,
    columns: list[str],
    rendered: list[str],
) -> None:
    dataset = loaded[config].select_columns(columns)
    function = _with_row_tools if "tools" in columns else trl.maybe_apply_chat_template
    mapped = dataset.map(
        function,
        fn_kwargs={"processing_class": tokenizer},
        remove_columns=["messages"] if "messages" in columns else None,
    )
    for split in dataset:
        assert mapped[split].num_rows == dataset[split].num_rows
        for column in rendered:
            assert mapped[split].features[column] == datasets.Value("string")
            assert all(isinstance(text, str) and text for text in mapped[split][column])
        for text in mapped[split][rendered[0]]:
            assert TASK_HEADING in text


def test_trl_unpairs_dpo_pairs(trl: Any, loaded: dict[str, datasets.DatasetDict]) -> None:
    pairs = loaded["dpo"]["train"].select_columns(["prompt", "chosen", "rejected"])
    unpaired = trl.unpair_preference_dataset(pairs)
    assert unpaired.num_rows == 2 * pairs.num_rows
    assert sorted(unpaired["label"]) == [False] * pairs.num_rows + [True] * pairs.num_rows
    for row in unpaired:
        assert trl.is_conversational(row)


# --- same log, same bytes -------------------------------------------------------------------


def _files(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_exporting_the_same_log_again_gives_identical_bytes(exported: Exported) -> None:
    for out, formats, options in (
        (exported.out, list(EXPORTERS), OPTIONS),
        (exported.per_turn_out, PER_TURN_FORMATS, PER_TURN),
    ):
        first = _files(out)
        assert "README.md" in first and MANIFEST in first
        assert not [name for name in first if "/." in name or name.startswith(".")]  # no temp left
        again = exported.root / f"{out.name}-again"
        report = export(exported.store, list(reversed(formats)), again, options)
        assert not report.unchanged
        second = _files(again)
        assert sorted(second) == sorted(first)
        for name, data in first.items():
            assert second[name] == data, name


def test_an_unchanged_export_rewritten_in_place_keeps_every_byte(
    exported: Exported, tmp_path: Path
) -> None:
    for out, formats, options in (
        (exported.out, list(EXPORTERS), OPTIONS),
        (exported.per_turn_out, PER_TURN_FORMATS, PER_TURN),
    ):
        copy = tmp_path / out.name
        shutil.copytree(out, copy)
        report = export(exported.store, formats, copy, options)
        assert sorted(report.unchanged) == sorted(formats)  # nothing rebuilt
        before, after = _files(out), _files(copy)
        assert sorted(after) == sorted(before)
        assert [name for name in before if after[name] != before[name]] == []


# --- one schema per config across shards ----------------------------------------------------


def _noise(rng: random.Random, lines: int) -> str:
    return "".join(f"# {rng.getrandbits(256):064x}\n" for _ in range(lines))


def test_every_shard_of_a_config_has_the_same_schema(tmp_path: Path, cache: Path) -> None:
    """Small shards over many Runs with big programs: sft and distill span several shards in
    each split, and every shard of a config has one schema, metadata included, though
    the first shards' Runs have no final score (all null) and the later ones have one."""
    rng = random.Random(20240611)
    with open_store(tmp_path / "store", create=True) as store:
        for i in range(140):
            program = {"policy.py": policy_source(float(i)) + _noise(rng, 40)}
            planned = [Planned(program, [0, 1], [float(i), 1.0])]
            if i % 7 == 0:  # a few with a second program and a failure: rows of other shapes
                planned.append(
                    Planned(
                        {"policy.py": policy_source(0.5), "extra.py": "X = 1\n"}, [0, 1], [0.0, 0.5]
                    )
                )
                planned.append(Planned({"policy.py": policy_source(0.25)}, [2], None))
            final = None if i < 70 else float(i)
            run = SynthRun(
                run_id=f"shards-{i:03d}", submissions=planned, chatter=i % 3, assessment_score=final
            )
            write_run(store, run)
        # One task: split by Run, so both splits have many Runs (and shards).
        options = ExportOptions(test_fraction=0.5, max_shard_bytes=64 * 1024, split_by="run")
        out = tmp_path / "out"
        report = export(store, list(EXPORTERS), out, options)
        several = set()  # configs with several shards in each split
        for name, config in report.configs.items():
            files = [out / name / f for split in config["splits"].values() for f in split["files"]]
            if not files:
                continue
            features = EXPORTERS[name](store, options).features()
            schemas = [pq.read_schema(path) for path in files]
            for path, schema in zip(files, schemas, strict=True):
                assert schema.equals(schemas[0], check_metadata=True), path.name
                # (Parquet names list items "element": the Arrow types match, the features too.)
                assert schema.equals(features.arrow_schema), path.name
                assert datasets.Features.from_arrow_schema(schema) == features, path.name
            if all(len(split["files"]) >= 2 for split in config["splits"].values()):
                several.add(name)
        assert {"sft", "distill"} <= several
        for name in sorted(several):
            dataset = load(out, name, cache)
            for split, facts in report.configs[name]["splits"].items():
                assert dataset[split].num_rows == facts["rows"]
                assert dataset[split].features == EXPORTERS[name](store, options).features()
