"""Creating a Run in the decider: the config it resolves, ``RunCreated`` built from ``Create``
field for field, and one rule per command and per event in the dispatch tables.

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from evopolicygym.records.events import (
    EVENT_TYPES,
    CellRunAssigned,
    CellRunEnded,
    ExperimentCreated,
    RunCreated,
)
from evopolicygym.run.config import RunConfig, RunConfigError, ValidationConfig
from evopolicygym.run.decider import (
    Command,
    Conclude,
    Create,
    Finish,
    Interrupt,
    Rejection,
    RunState,
    StartAgent,
    StartValidation,
    decide,
    next_step,
)
from evopolicygym.run.decider.agent_requests import AGENT_REQUESTS
from evopolicygym.run.decider.commands import run_created
from evopolicygym.run.decider.dispatch import rule_for
from evopolicygym.run.decider.evolution import FOLDS
from evopolicygym.run.decider.host_commands import HOST_COMMANDS
from tests.support.decider import SEEDS, Run, make_config, make_create, make_pool


def test_config_defaults_resolve_from_the_budget() -> None:
    config = make_config(episode_budget=7)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (7, 7, 7)
    config = make_config(episode_budget=7, episode_pool_size=5)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (5, 7, 5)
    config = make_config(episode_budget=7, max_submissions=2, max_episodes_per_submission=4)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (7, 2, 4)
    assert config.resolved() == config
    assert RunConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "kwargs",
    [
        {"episode_budget": 0},
        {"episode_budget": 4, "episode_pool_size": 0},
        {"episode_budget": 4, "max_submissions": 0},
        {"episode_budget": 4, "episode_pool_size": 3, "max_episodes_per_submission": 4},
        {
            "episode_budget": 7,
            "max_submissions": 2,
            "max_episodes_per_submission": 3,
            "finish_budget_policy": "require_budget_exhaustion",
        },
        {"validation": ValidationConfig(max_candidates=0)},
        {"max_agent_attempts": 0},
    ],
)
def test_config_that_cannot_work_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(RunConfigError):
        make_config(**kwargs)


def test_create_twice_and_commands_before_create_are_refused() -> None:
    config = make_config(episode_budget=3)
    run = Run(config)
    (created,) = run.events
    assert isinstance(created, RunCreated)
    assert created.config == config.to_dict() and created.seeds == SEEDS
    assert run.state.cfg == config and run.state.pool == tuple(make_pool(3))
    assert run.state.authority_open and run.state.version == 1
    run.reject(make_create(config), "invalid_request")
    for command in (StartAgent(), Conclude(), StartValidation(), Interrupt(reason="x")):
        decision = decide(RunState(), command)
        assert isinstance(decision, Rejection) and decision.code == "invalid_request"
    assert isinstance(next_step(run.state), StartAgent)


# --------------------------------------------------------------------------- RunCreated


def test_run_created_has_exactly_the_fields_of_create() -> None:
    """RunCreated is built from Create by field name: a field added to one and not the other
    fails here (the config is the one field recorded in another form, as a plain dict)."""
    create = {f.name: f for f in msgspec.structs.fields(Create)}
    created = {f.name: f for f in msgspec.structs.fields(RunCreated)}
    assert set(create) == set(created)
    assert (create["config"].type, created["config"].type) == (RunConfig, dict[str, Any])
    for name in set(create) - {"config"}:
        assert create[name].type == created[name].type, name
        # The event may default what older logs lack; what it requires, Create requires.
        assert create[name].required or not created[name].required, name


def test_run_created_records_create_as_given() -> None:
    config = make_config(episode_budget=3)
    command = msgspec.structs.replace(
        make_create(config),
        pool=[],
        pool_blob="sha256:pool",
        skill_program_digests=["sha256:skill"],
        agent_containment="namespaces",
    )
    expected = RunCreated(
        run_id=command.run_id,
        config=config.to_dict(),
        benchmark_id=command.benchmark_id,
        benchmark_spec=command.benchmark_spec,
        environment_digest=command.environment_digest,
        initial_program_digest=command.initial_program_digest,
        agent=command.agent,
        pool=[],
        pool_blob="sha256:pool",
        seeds=command.seeds,
        skill_program_digests=["sha256:skill"],
        agent_containment="namespaces",
    )
    assert run_created(command) == expected
    assert decide(RunState(), command) == [expected]


# --------------------------------------------------------------------------- dispatch tables


RUN_EVENTS = set(EVENT_TYPES.values()) - {ExperimentCreated, CellRunAssigned, CellRunEnded}


def handled_type(rule: Callable[..., Any]) -> set[type]:
    """The command or event types a rule's second parameter is annotated with."""
    hints = typing.get_type_hints(rule)
    hints.pop("return", None)
    annotation = list(hints.values())[1]
    return set(typing.get_args(annotation)) or {annotation}


def test_every_command_has_one_rule_named_for_it() -> None:
    commands = set(Command.__subclasses__())
    assert set(AGENT_REQUESTS) | set(HOST_COMMANDS) == commands
    assert not set(AGENT_REQUESTS) & set(HOST_COMMANDS)
    for table in (AGENT_REQUESTS, HOST_COMMANDS):
        for command, rule in table.items():
            assert handled_type(rule) == {command}, rule
            assert rule.__doc__ and "Rule" in rule.__doc__, rule


def test_every_event_of_a_run_has_one_fold_named_for_it() -> None:
    assert set(FOLDS) == RUN_EVENTS
    for event, fold_in in FOLDS.items():
        assert event in handled_type(fold_in), fold_in
        assert fold_in.__doc__ and "Rule" in fold_in.__doc__, fold_in


def test_a_subclass_is_decided_and_folded_as_its_base() -> None:
    class LateConclude(Conclude, frozen=True, kw_only=True):
        pass

    class LateFinish(Finish, frozen=True, kw_only=True):
        pass

    state = RunState()
    assert decide(state, LateConclude()) == decide(state, Conclude())
    assert decide(state, LateFinish(request_id="r", candidates=[1])) == decide(
        state, Finish(request_id="r", candidates=[1])
    )
    assert rule_for(FOLDS, type(make_create(make_config(episode_budget=1)))) is None
