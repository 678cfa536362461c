"""Exporters: recorded Runs as Hugging Face datasets, one config per format.

``export(store, ["sft", "dpo"], "out/")`` writes parquet shards with explicit
features and a dataset card, loadable with ``datasets.load_dataset("out/", "sft")``.
"""

from __future__ import annotations

from evopolicygym_exporters.base import Exporter, ExportOptions
from evopolicygym_exporters.history import RunFilter, RunHistory, read_histories
from evopolicygym_exporters.pipeline import MANIFEST, ExportError, ExportReport, export
from evopolicygym_exporters.registry import EXPORTERS
from evopolicygym_exporters.rewards import RewardError, reward_function, score_program

__all__ = [
    "EXPORTERS",
    "MANIFEST",
    "ExportError",
    "ExportOptions",
    "ExportReport",
    "Exporter",
    "RewardError",
    "RunFilter",
    "RunHistory",
    "export",
    "read_histories",
    "reward_function",
    "score_program",
]
