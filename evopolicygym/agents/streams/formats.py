"""The stream formats: a parser class per format, and the parser for an Agent provider.

Our own agents (``reference``, ``command``, ``chat``) print the ``native`` format; each
other provider's CLI prints the format of its name.
"""

from __future__ import annotations

from collections.abc import Callable

from evopolicygym.agents.streams.claude import ClaudeCodeParser, QoderParser
from evopolicygym.agents.streams.codex import CodexParser
from evopolicygym.agents.streams.common import StreamParser
from evopolicygym.agents.streams.kimi import KimiParser
from evopolicygym.agents.streams.native import NativeParser

__all__ = ["PARSERS", "parser_for"]

PARSERS: dict[str, Callable[[], StreamParser]] = {
    "native": NativeParser,
    "codex": CodexParser,
    "claude-code": ClaudeCodeParser,
    "kimi": KimiParser,
    "qoder": QoderParser,
}

_NATIVE_PROVIDERS = ("reference", "command", "chat")


def parser_for(provider: str) -> StreamParser:
    """A fresh parser for an Agent provider's (or a stream format's) stdout."""
    key = "native" if provider in _NATIVE_PROVIDERS else provider
    factory = PARSERS.get(key)
    if factory is None:
        known = ", ".join([*PARSERS, *_NATIVE_PROVIDERS])
        raise ValueError(f"no stream parser for {provider!r}; known: {known}")
    return factory()
