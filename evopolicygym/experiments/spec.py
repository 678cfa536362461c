"""The experiment spec (TOML) and its resolution into a matrix of cells.

A spec names agents, Benchmarks, Run seeds (repeats), agent seeds and a Run profile
(``quick``, ``paper-128`` or a TOML RunConfig file), with ``[run]`` overriding profile
fields. ``resolve`` turns it into the ``ExperimentCreated`` the stream starts with:
the shared RunConfig resolved once, and one cell per agent x Benchmark x seed x agent
seed. Checking that each provider and Benchmark exists is the caller's (the CLI's):
this package may not import the registry nor the agents.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.records.events import (
    ExperimentAgent,
    ExperimentBenchmark,
    ExperimentCell,
    ExperimentCreated,
    encode_payload,
)
from evopolicygym.records.store import MAX_EVENT_BYTES
from evopolicygym.run.config import RunConfig, RunConfigError

__all__ = [
    "MAX_CELLS",
    "PROFILES",
    "AgentSpec",
    "BenchmarkSpec",
    "ExperimentSpec",
    "SpecError",
    "load_spec",
    "profile_config",
    "render_spec_schema",
    "resolve",
    "spec_schema",
]

# The largest matrix one experiment takes: far beyond one machine's weeks of Runs, and its
# ExperimentCreated stays well under the event size limit.
MAX_CELLS = 10_000
PROFILES = ("quick", "paper-128")
# Run settings an experiment decides per cell, never in [run] or a profile.
_PER_CELL = ("seed", "benchmark_params")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=+-]{0,99}")


class SpecError(ValueError):
    """A spec that cannot be run; the one-line message names the key."""


class AgentSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One agent: ``provider`` and the options `evopolicy run` takes for it."""

    provider: str
    name: str | None = None  # its label in the matrix [default: the provider]
    model: str | None = None
    effort: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_turns: int | None = None
    max_tokens: int | None = None
    agent_command: str | None = None
    agent_env: list[str] = []
    skills: list[str] = []  # skill directories, relative to the spec's directory


class BenchmarkSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One Benchmark: its registry ``id``, factory ``params`` and an optional label."""

    id: str
    # The factory's parameters, passed as `evopolicy run --param` passes them: strings, and
    # other TOML values as JSON (true, 3, 0.5).
    params: dict[str, str | int | float | bool] = {}
    name: str | None = None  # its label in the matrix [default: the id]


class ExperimentSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An experiment: the matrix agents x benchmarks x seeds x agent_seeds under one profile."""

    name: str  # the experiment id
    agents: list[AgentSpec]
    benchmarks: list[BenchmarkSpec]
    seeds: int | list[int] = 1  # Run seeds (repeats): a list, or N for 0..N-1
    # The reference Agent's seeds (a repeat label for other agents): a list, or N for 0..N-1.
    agent_seeds: int | list[int] = 1
    profile: str = "quick"  # quick, paper-128 or a TOML RunConfig file (relative to the spec)
    run: dict[str, Any] = {}  # RunConfig fields over the profile's


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of the spec (checked in as schemas/experiment-spec.json)."""
    schema: dict[str, Any] = msgspec.json.schema(ExperimentSpec)
    schema["title"] = "EvoPolicyGym experiment spec"
    return schema


def _toml(path: Path, what: str) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise SpecError(f"{what} {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} {path}: not TOML ({exc})") from None


def _located(exc: msgspec.ValidationError) -> str:
    """msgspec's message, with its JSON path (``$.agents[0]``) read as the spec's keys."""
    text = str(exc).replace("`$.", "`").replace("`$`", "the spec")
    return " ".join(text.split())


def load_spec(path: str | Path) -> ExperimentSpec:
    """Parse a spec file; ``SpecError`` naming the key of the first problem."""
    path = Path(path)
    data = _toml(path, "spec")
    try:
        return msgspec.convert(data, ExperimentSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(f"spec {path}: {_located(exc)}") from None


def profile_config(profile: str, base: Path) -> dict[str, Any]:
    """A profile's RunConfig fields: a shipped profile's, or those of the TOML file
    ``profile`` names (relative to ``base``)."""
    if profile in PROFILES:
        text = (
            importlib.resources.files("evopolicygym.experiments")
            .joinpath(f"profiles/{profile}.toml")
            .read_text()
        )
        return tomllib.loads(text)
    path = base / profile
    if not path.is_file():
        raise SpecError(f"profile: {profile!r} is neither {' nor '.join(PROFILES)} nor a file")
    return _toml(path, "profile")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _seeds(value: int | list[int], key: str) -> list[int]:
    seeds = list(range(value)) if isinstance(value, int) else list(value)
    if isinstance(value, int) and not 1 <= value <= MAX_CELLS:
        raise SpecError(f"{key}: a count must be between 1 and {MAX_CELLS:,}")
    if not seeds:
        raise SpecError(f"{key}: give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{key}: a seed is given twice")
    if any(not 0 <= seed < 2**63 for seed in seeds):
        raise SpecError(f"{key}: seeds must be between 0 and 2**63 - 1")
    return seeds


def _config(spec: ExperimentSpec, base: Path) -> dict[str, Any]:
    profile = profile_config(spec.profile, base)
    for key in _PER_CELL:
        if key in spec.run or key in profile:
            where = "[run]" if key in spec.run else f"profile {spec.profile}"
            raise SpecError(
                f"{where}: {key} is set per cell (seeds, [[benchmarks]] params), not here"
            )
    data = _merge(profile, spec.run)
    data.setdefault("jobs", 1)  # one evaluation process per Run: --max-runs spreads the cores
    try:
        config = msgspec.convert(data, RunConfig).resolved()
    except msgspec.ValidationError as exc:
        raise SpecError(f"[run] (over profile {spec.profile}): {_located(exc)}") from None
    except RunConfigError as exc:
        raise SpecError(f"[run] (over profile {spec.profile}): {exc}") from None
    resolved = config.to_dict()
    for key in _PER_CELL:
        resolved.pop(key, None)
    return resolved


def _agent(agent: AgentSpec, base: Path) -> ExperimentAgent:
    options: dict[str, Any] = {}
    for key in (
        "model",
        "effort",
        "base_url",
        "api_key_env",
        "max_turns",
        "max_tokens",
        "agent_command",
    ):
        value = getattr(agent, key)
        if value is not None:
            options[key] = value
    if agent.agent_env:
        options["agent_env"] = sorted(set(agent.agent_env))
    if agent.skills:
        options["skills"] = [str((base / skill).resolve()) for skill in agent.skills]
    return ExperimentAgent(
        name=agent.name or agent.provider, provider=agent.provider, options=options
    )


def _params(params: dict[str, str | int | float | bool]) -> dict[str, Any]:
    return {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in params.items()
    }


def _unique(labels: list[str], key: str) -> None:
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise SpecError(
                f"{key}: label {label!r} must be letters, digits and . _ : = + - "
                "(at most 100, no '/')"
            )
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise SpecError(f"{key}: two share the label {twice[0]!r}; give each a distinct name")


def resolve(spec: ExperimentSpec, base: str | Path) -> ExperimentCreated:
    """The experiment's first event: its shared RunConfig and every cell, with the digest of
    that matrix (the same spec resolves to the same digest). ``base``: the spec's directory."""
    base = Path(base)
    if not _NAME.fullmatch(spec.name):
        raise SpecError(
            f"name: {spec.name!r} must be letters, digits, '.', '_' or '-' (at most 100)"
        )
    if not spec.agents:
        raise SpecError("agents: give at least one [[agents]]")
    if not spec.benchmarks:
        raise SpecError("benchmarks: give at least one [[benchmarks]]")
    seeds = _seeds(spec.seeds, "seeds")
    agent_seeds = _seeds(spec.agent_seeds, "agent_seeds")
    size = len(spec.agents) * len(spec.benchmarks) * len(seeds) * len(agent_seeds)
    if size > MAX_CELLS:
        raise SpecError(
            f"the matrix has {size:,} cells (agents x benchmarks x seeds x agent_seeds), "
            f"more than the {MAX_CELLS:,} one experiment takes; split it into several"
        )
    config = _config(spec, base)
    agents = [_agent(agent, base) for agent in spec.agents]
    benchmarks = [
        ExperimentBenchmark(name=b.name or b.id, id=b.id, params=_params(b.params))
        for b in spec.benchmarks
    ]
    _unique([a.name for a in agents], "agents")
    _unique([b.name for b in benchmarks], "benchmarks")
    cells = [
        ExperimentCell(
            cell_id=f"{agent.name}/{benchmark.name}/seed={seed}/agent_seed={agent_seed}",
            agent=agent.name,
            benchmark=benchmark.name,
            seed=seed,
            agent_seed=agent_seed,
        )
        for agent in agents
        for benchmark in benchmarks
        for seed in seeds
        for agent_seed in agent_seeds
    ]
    matrix = {"config": config, "agents": agents, "benchmarks": benchmarks, "cells": cells}
    digest = hashlib.sha256(msgspec.json.encode(matrix, order="sorted")).hexdigest()
    created = ExperimentCreated(
        experiment_id=spec.name,
        spec_digest=digest,
        profile=spec.profile,
        config=config,
        agents=agents,
        benchmarks=benchmarks,
        cells=cells,
    )
    size_bytes = len(encode_payload(created))
    if size_bytes > MAX_EVENT_BYTES:
        raise SpecError(
            f"the resolved matrix is {size_bytes:,} bytes, over the event limit of "
            f"{MAX_EVENT_BYTES:,}: shorten the labels, options or parameters, "
            "or split the experiment"
        )
    return created


def render_spec_schema() -> str:
    """The spec's JSON Schema as the checked-in file holds it."""
    return json.dumps(spec_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m evopolicygym.experiments.spec > schemas/experiment-spec.json
    print(render_spec_schema(), end="")
