"""Exporters: recorded Runs as Hugging Face datasets, one config per format.

``export(store, ["sft", "dpo"], "out/")`` writes parquet shards with explicit
features and a dataset card, loadable with ``datasets.load_dataset("out/", "sft")``.
Names load on first use (as in every ``evopolicygym`` package): importing the package
alone does not import ``datasets``.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ExportOptions": "evopolicygym_exporters.base",
    "Exporter": "evopolicygym_exporters.base",
    "RunFilter": "evopolicygym_exporters.history",
    "RunHistory": "evopolicygym_exporters.history",
    "read_histories": "evopolicygym_exporters.history",
    "MANIFEST": "evopolicygym_exporters.pipeline",
    "ExportError": "evopolicygym_exporters.pipeline",
    "ExportReport": "evopolicygym_exporters.pipeline",
    "export": "evopolicygym_exporters.pipeline",
    "EXPORTERS": "evopolicygym_exporters.registry",
    "RewardError": "evopolicygym_exporters.rewards",
    "reward_function": "evopolicygym_exporters.rewards",
    "score_program": "evopolicygym_exporters.rewards",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
