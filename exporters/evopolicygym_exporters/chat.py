"""Transcripts in the chat form trainers load: message features, conversion, tool schemas.

A message is a struct with the keys chat templates read (``role``,
``content``, ``reasoning_content``, ``tool_calls`` as OpenAI-style function
calls with ``arguments`` as a JSON object, ``tool_call_id``, ``name``). Every
message has every key, so the column has one Arrow type across Runs; a key a
message does not use is null (``tool_calls`` too, not an empty list), so
``{k: v for k, v in m.items() if v is not None}`` gives templates that test
for a key's presence exactly the keys the message has.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from datasets import Json, List, Value

from evopolicygym.transcript import BUILTIN_TOOLS, KICKOFF, AgentIdentity, Message

__all__ = [
    "AGENT",
    "MESSAGE",
    "MESSAGES",
    "agent_value",
    "chat_message",
    "chat_messages",
    "conversation",
    "plain",
    "tool_call",
    "tools_for",
    "tools_offered",
]

TOOL_CALL = {
    "id": Value("string"),
    "type": Value("string"),
    "function": {"name": Value("string"), "arguments": Json()},
}
MESSAGE = {
    "role": Value("string"),
    "content": Value("string"),
    "reasoning_content": Value("string"),
    "tool_calls": List(TOOL_CALL),
    "tool_call_id": Value("string"),
    "name": Value("string"),
}
MESSAGES = List(MESSAGE)
AGENT = {
    "name": Value("string"),
    "provider": Value("string"),
    "model": Value("string"),
    "options": Json(),
}

_JSON_TYPES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    dict: "object",
}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_message(message: Message) -> dict[str, Any]:
    """One normalized transcript message as a chat-template message."""
    return {
        "role": message.role,
        "content": message.content,
        "reasoning_content": message.reasoning,
        "tool_calls": [tool_call(c.id, c.name, dict(c.arguments)) for c in message.tool_calls]
        or None,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


def plain(role: str, content: str) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "reasoning_content": None,
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
    }


def chat_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [chat_message(m) for m in messages]


def conversation(transcript: Sequence[Message]) -> list[dict[str, Any]]:
    """An attempt's transcript as a conversation: system task, a user turn, then the Agent's."""
    messages = chat_messages(transcript)
    opening = 1 if messages and messages[0]["role"] == "system" else 0
    if len(messages) <= opening or messages[opening]["role"] != "user":
        messages.insert(opening, plain("user", KICKOFF))
    return messages


def tools_for(agent: AgentIdentity, messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools list for a conversation: known schemas for the tools it calls, and for any
    other tool a schema inferred from its arguments (the transcript is all that is known)."""
    seen: dict[str, dict[str, Any]] = {}
    for message in messages:
        for call in message["tool_calls"] or ():
            name = call["function"]["name"]
            arguments = call["function"]["arguments"] or {}
            known = BUILTIN_TOOLS.get(agent.provider, {})
            if name in known:
                seen.setdefault(name, known[name])
                continue
            tool = seen.setdefault(
                name,
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": f"A tool of the {agent.provider} agent.",
                        "parameters": {"type": "object", "properties": {}},
                    },
                },
            )
            properties = tool["function"]["parameters"]["properties"]
            for key, value in arguments.items():
                kind = _JSON_TYPES.get(type(value))
                properties.setdefault(key, {} if kind is None else {"type": kind})
    return [seen[name] for name in sorted(seen)]


def tools_offered(
    agent: AgentIdentity, offered: list[dict[str, Any]] | None, messages: Iterable[dict[str, Any]]
) -> tuple[list[dict[str, Any]], bool]:
    """The tools an Agent attempt was offered, and whether any schema is inferred: the
    recorded list (exact) where its AgentStarted has one, with a schema inferred from the
    calls for any tool called but not in it; else ``tools_for`` the calls."""
    if offered is None:
        return tools_for(agent, messages), True
    names = {tool.get("function", {}).get("name") for tool in offered}
    called = [
        message
        for message in messages
        if any(call["function"]["name"] not in names for call in message["tool_calls"] or ())
    ]
    extra = [tool for tool in tools_for(agent, called) if tool["function"]["name"] not in names]
    return [*offered, *extra], bool(extra)


# Agent options never exported: a command line can hold local paths and inline secrets.
PRIVATE_OPTIONS = frozenset({"command"})


def agent_value(agent: AgentIdentity) -> dict[str, Any]:
    return {
        "name": agent.name,
        "provider": agent.provider,
        "model": agent.model,
        "options": {k: v for k, v in agent.options.items() if k not in PRIVATE_OPTIONS},
    }
