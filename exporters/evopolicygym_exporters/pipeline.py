"""``export``: recorded Runs to one dataset directory with one config per format.

One pass over the finished Runs feeds every requested exporter; each writes
its config into a building directory first. Once every config is complete,
the new shards are moved in beside the old (their names differ), the manifest
and card switch to them, and only then are the old ones deleted, so an export
that fails or is killed leaves the previous one loadable.
``export.json`` records per config a fingerprint of the store head
(position and chained hash), the exporter's version and every setting that
changes rows: a config whose fingerprint is unchanged is left as it is (and
nothing is read), any change rebuilds it. The same log and settings always
give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.location import Store
from evopolicygym.records.runs import RUN_PREFIX
from evopolicygym.records.verify import log_head
from evopolicygym_exporters.base import Exporter, ExportOptions
from evopolicygym_exporters.card import render_card
from evopolicygym_exporters.history import read_histories
from evopolicygym_exporters.registry import EXPORTERS
from evopolicygym_exporters.writer import ConfigWriter

__all__ = ["MANIFEST", "ExportError", "ExportReport", "empty_splits", "export", "split_warning"]

MANIFEST = "export.json"
# What a Run's recorded data can raise when it is damaged or too odd to export (a missing
# blob, a malformed trace, a program too deeply nested to parse): that Run is left out.
RUN_DATA_ERRORS: tuple[type[BaseException], ...] = (
    BlobError,
    ValueError,
    LookupError,
    RecursionError,
)

log = logging.getLogger(__name__)


class ExportError(ValueError):
    """An export that cannot be made as asked (an unknown format, an unusable output)."""


@dataclass
class ExportReport:
    output: Path
    runs: int = 0  # Runs exported (after filters)
    skipped: list[str] = field(default_factory=list)  # "<run>: <why>" for Runs left out
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    # Per config with rows, the splits that came out with none (see ``empty_splits``).
    empty: dict[str, list[str]] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        """One line per config with an empty split: how its groups fell, and what changes it."""
        return [
            f"{name}: {split_warning(self.configs[name], splits[0])}"
            for name, splits in self.empty.items()
        ]


def empty_splits(entry: dict[str, Any], test_fraction: float) -> list[str]:
    """The splits of a config's manifest ``entry`` that hold no row while the config has
    rows (so one at most); an empty ``test`` at a test fraction of 0 is what was asked."""
    rows = {split: part["rows"] for split, part in entry["splits"].items()}
    if not sum(rows.values()):
        return []
    return [
        split
        for split, count in rows.items()
        if not count and (split != "test" or test_fraction > 0)
    ]


def split_warning(entry: dict[str, Any], empty: str) -> str:
    """Why the ``empty`` split of a config (its manifest ``entry``) has no row and what
    changes that: ``the test split is empty: all 3 split groups (by task) hash to train at
    test fraction 0.1; raise test fraction, ...`` (the CLI names its options for the words)."""
    by = entry.get("split_by", "task")
    groups = entry.get("split_groups", 0)
    which = (
        f"its only split group (by {by})" if groups == 1 else f"all {groups} split groups (by {by})"
    )
    other = "train" if empty == "test" else "test"
    change = "raise test fraction" if empty == "test" else "lower test fraction"
    if empty == "test" and by == "task":
        change += ", or split by run"
    return (
        f"the {empty} split is empty: {which} {'hashes' if groups == 1 else 'hash'} to {other} "
        f"at test fraction {entry.get('test_fraction', 0.0):g}; {change}"
    )


def _head(store: Store) -> tuple[int, str]:
    """The log's head the export was made from (``record head``; empty: 0 and "")."""
    anchor = log_head(store)
    return anchor.position, anchor.hash if anchor.position else ""


def _fingerprint(exporter: Exporter, head: tuple[int, str], options: ExportOptions) -> str:
    facts = {
        "format": exporter.name,
        "exporter_version": exporter.version,
        "store_head": head[0],
        "store_hash": head[1],
        "filter": options.run_filter.describe(),
        "settings": exporter.settings(),
        "test_fraction": options.test_fraction,
        "split_by": options.split_by,
        "max_shard_bytes": options.max_shard_bytes,
    }
    return "sha256:" + hashlib.sha256(msgspec.json.encode(facts, order="sorted")).hexdigest()


def _tag(fingerprint: str) -> str:
    """The part of a fingerprint that names a config's files."""
    return fingerprint.removeprefix("sha256:")[:12]


def _read_manifest(output: Path) -> dict[str, Any]:
    try:
        data = json.loads((output / MANIFEST).read_text())
    except (OSError, ValueError):
        return {"configs": {}}
    return (
        data
        if isinstance(data, dict) and isinstance(data.get("configs"), dict)
        else {"configs": {}}
    )


def _intact(output: Path, entry: dict[str, Any]) -> bool:
    return all(
        (output / entry["name"] / name).is_file()
        for split in entry["splits"].values()
        for name in split["files"]
    )


def _write_text(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def export(
    store: Store,
    formats: Sequence[str],
    output: str | os.PathLike[str],
    options: ExportOptions | None = None,
    *,
    on_run: Callable[[], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ExportReport:
    """Export ``formats`` of the Runs in ``store`` into ``output``; ``on_start(total streams)``
    and ``on_run()`` report progress over the Runs read."""
    options = options or ExportOptions()
    unknown = [f for f in formats if f not in EXPORTERS]
    if unknown or not formats:
        what = f"unknown format {', '.join(map(repr, unknown))}" if unknown else "no format given"
        raise ExportError(f"{what} (formats: {', '.join(EXPORTERS)})")
    root = Path(output)
    if root.exists() and not root.is_dir():
        raise ExportError(f"output {root} exists and is not a directory")
    leftovers = {_building(name) for name in EXPORTERS}  # of an export that was killed
    if (
        root.is_dir()
        and any(p.name not in leftovers for p in root.iterdir())
        and not (root / MANIFEST).is_file()
    ):
        # Its README.md and folders would be overwritten: only ever write over an export.
        raise ExportError(
            f"output {root} is not empty and holds no export ({MANIFEST}); choose a new directory"
        )
    root.mkdir(parents=True, exist_ok=True)
    head = _head(store)
    manifest = _read_manifest(root)
    report = ExportReport(output=root)
    pending: dict[str, tuple[Exporter, str]] = {}
    for name in dict.fromkeys(formats):
        exporter = EXPORTERS[name](store, options)
        fingerprint = _fingerprint(exporter, head, options)
        previous = manifest["configs"].get(name)
        if previous and previous.get("fingerprint") == fingerprint and _intact(root, previous):
            report.unchanged.append(name)
            report.configs[name] = previous
        else:
            pending[name] = (exporter, fingerprint)

    built: dict[str, list[str]] = {}
    try:
        if pending:
            report.runs = _build(
                store, root, pending, options, head, manifest, report, on_run, on_start
            )
            # The new shards go beside the old ones (their names differ by tag), so the card
            # and manifest name complete files before, during and after the switch.
            for name in pending:
                building, final = root / _building(name), root / name
                final.mkdir(exist_ok=True)
                built[name] = sorted(p.name for p in building.iterdir())
                for shard in built[name]:
                    os.replace(building / shard, final / shard)
    finally:
        for name in pending:
            shutil.rmtree(root / _building(name), ignore_errors=True)

    for name, entry in report.configs.items():  # built now or kept from an earlier export
        empty = empty_splits(entry, entry.get("test_fraction", options.test_fraction))
        if empty:
            report.empty[name] = empty
    manifest["configs"] = {k: manifest["configs"][k] for k in sorted(manifest["configs"])}
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _write_text(root / MANIFEST, text)
    # The card from the manifest as stored: a config reused from an earlier export and one
    # built now must render alike, or an unchanged export would change its card's bytes.
    _write_text(root / "README.md", render_card(json.loads(text), options.license))
    for name, keep in built.items():  # only now are the old shards unreferenced
        for path in (root / name).iterdir():
            if path.name not in keep:
                path.unlink()
    return report


def _building(name: str) -> str:
    return f".{name}.building"


def _build(
    store: Store,
    root: Path,
    pending: dict[str, tuple[Exporter, str]],
    options: ExportOptions,
    head: tuple[int, str],
    manifest: dict[str, Any],
    report: ExportReport,
    on_run: Callable[[], None] | None,
    on_start: Callable[[int], None] | None,
) -> int:
    """One pass over the Runs writing every pending config into its building directory;
    their manifest entries. Returns the number of Runs exported."""
    writers = {}
    for name, (exporter, fingerprint) in pending.items():
        shutil.rmtree(root / _building(name), ignore_errors=True)
        writers[name] = ConfigWriter(
            root / _building(name),
            exporter.features(),
            tag=_tag(fingerprint),
            max_shard_bytes=options.max_shard_bytes,
            batch_rows=exporter.batch_rows,
        )
    if on_start is not None:
        on_start(len(store.events.streams(RUN_PREFIX)))
    runs = 0

    def skip(run_id: str, reason: str) -> None:
        log.warning("export: left out %s: %s", run_id, reason)
        report.skipped.append(f"{run_id}: {' '.join(reason.split())}")

    histories = read_histories(store, options.run_filter, on_run, head[0], on_skip=skip)
    try:
        for run in histories:
            try:  # a Run's rows are all written or, if its data cannot be read, none of them
                rows = {
                    name: [(key, exporter.finalize(row)) for key, row in exporter.rows(run)]
                    for name, (exporter, _) in pending.items()
                }
            except RUN_DATA_ERRORS as exc:
                skip(run.stream_id, f"{type(exc).__name__}: {exc}")
                for exporter, _ in pending.values():
                    exporter.forget()
                continue
            runs += 1
            for name, pairs in rows.items():
                exporter = pending[name][0]
                for key, row in pairs:
                    writers[name].add(key, exporter.identity(row), row)
                exporter.forget()
        for name, (exporter, fingerprint) in pending.items():
            for key, row in exporter.finish():
                row = exporter.finalize(row)
                writers[name].add(key, exporter.identity(row), row)
            exporter.forget()
            units = writers[name].units
            report.configs[name] = manifest["configs"][name] = {
                "name": name,
                "fingerprint": fingerprint,
                "tag": _tag(fingerprint),
                "exporter_version": exporter.version,
                "settings": exporter.settings(),
                "summary": exporter.summary,
                "task_categories": list(exporter.task_categories),
                "training_columns": list(exporter.training_columns()),
                "features": writers[name].features._to_yaml_list(),
                "store_head": head[0],
                "store_hash": head[1],
                # `evopolicy record verify --anchor` this: whether the log still holds what
                # the rows were made from
                "store_anchor": f"{head[0]}:{head[1]}" if head[0] else None,
                "filter": options.run_filter.describe(),
                "test_fraction": options.test_fraction,
                "split_by": options.split_by,
                # Groups (tasks or Runs) with rows, and the units they form once groups
                # that share an identical row are joined: a unit's rows share a split.
                "split_groups": len(units.groups),
                "split_units": units.count(),
                "splits": writers[name].finish(options.test_fraction),
            }
            entry = manifest["configs"][name]
            entry["empty_splits"] = empty_splits(entry, options.test_fraction)
    finally:
        for writer in writers.values():
            writer.close()
    return runs
