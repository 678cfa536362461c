"""``decide(state, command)``: the events that record a command, or why it is refused. Pure.

The Agent's requests are checked against the Run's rules and limits
(``agent_requests``); a refused one answers with a ``Rejection`` that carries the
rejection event the log keeps too. The Host's own commands (``host_commands``) are
refused only by a bug in the Host.
"""

from __future__ import annotations

from evopolicygym.records.events import Event
from evopolicygym.run.decider.agent_requests import AGENT_REQUESTS
from evopolicygym.run.decider.commands import Command, InvalidTransition, Rejection
from evopolicygym.run.decider.dispatch import rule_for
from evopolicygym.run.decider.host_commands import decide_host_command
from evopolicygym.run.decider.state import RunState

__all__ = ["decide"]


def decide(state: RunState, command: Command) -> list[Event] | Rejection:
    """The events that record ``command`` in ``state``, or why it is refused."""
    request = rule_for(AGENT_REQUESTS, type(command))
    if request is not None:
        return request(state, command)
    try:
        return decide_host_command(state, command)
    except InvalidTransition as exc:
        return Rejection(code="invalid_request", message=str(exc))
