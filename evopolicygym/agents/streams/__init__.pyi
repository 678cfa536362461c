# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.agents.streams.claude import ClaudeCodeParser as ClaudeCodeParser
from evopolicygym.agents.streams.claude import QoderParser as QoderParser
from evopolicygym.agents.streams.claude import synthetic_fault as synthetic_fault
from evopolicygym.agents.streams.codex import CodexParser as CodexParser
from evopolicygym.agents.streams.common import StreamParser as StreamParser
from evopolicygym.agents.streams.common import anthropic_usage as anthropic_usage
from evopolicygym.agents.streams.common import openai_usage as openai_usage
from evopolicygym.agents.streams.common import token_count as token_count
from evopolicygym.agents.streams.common import tool_arguments as tool_arguments
from evopolicygym.agents.streams.formats import PARSERS as PARSERS
from evopolicygym.agents.streams.formats import parser_for as parser_for
from evopolicygym.agents.streams.kimi import KimiParser as KimiParser
from evopolicygym.agents.streams.native import NativeParser as NativeParser

__all__ = [
    "PARSERS",
    "ClaudeCodeParser",
    "CodexParser",
    "KimiParser",
    "NativeParser",
    "QoderParser",
    "StreamParser",
    "anthropic_usage",
    "openai_usage",
    "parser_for",
    "synthetic_fault",
    "token_count",
    "tool_arguments",
]
