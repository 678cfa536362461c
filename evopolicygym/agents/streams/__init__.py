"""Agent stdout streams: each CLI's JSON lines normalized into transcript ``Message`` s.

The Host reads an Agent's stdout line by line (a line is at most 1 MiB; longer ones never
reach a parser) and keeps every byte in the raw stream blob. A ``StreamParser`` turns those
lines into ``transcript.Message`` s: ``feed(line)`` returns the messages the line
completes, ``close()`` at EOF returns whatever is still pending. Nothing a parser is fed
makes it raise. What yields no message is counted in ``unknown`` by kind (a line's event
type, ``"malformed"`` for a line that is not a JSON object, ``"parser-error"`` should a
parser fail on a line) so that a lossy transcript is visible; the line itself stays in the
raw blob. Lifecycle events whose content later events
repeat or that carry nothing for a chat transcript (Codex ``thread.started``,
``turn.started``, ``item.started``, ``item.updated``; Claude/Qoder ``system``/``init`` and
``result``) are consumed without being counted; blank lines are ignored.

Normalization, common to all parsers:

- Roles are ``assistant`` (text in ``content``, thinking in ``reasoning``, calls in
  ``tool_calls``), ``tool`` (a result: ``tool_call_id`` and, when known, the tool's
  ``name``) and ``user``. ``at`` is left 0: the Host stamps arrival time.
- Tool ``arguments`` are always a dict: a JSON string of arguments is parsed; a value that
  is not an object becomes ``{"value": ...}``; none at all is ``{}``. Nesting deeper than
  32 levels is kept as the JSON text of the deeper value, so a message always encodes.
- Tool call ids are the CLI's own; a call without one gets ``<provider>-call-<n>``
  (``n`` counting such calls), so replaying a stream gives the same ids.
- ``Usage.input_tokens`` counts every prompt token, cached ones included;
  ``cached_tokens`` is the cached part of it (OpenAI's convention). Anthropic-style usage
  (Claude Code, Qoder) is converted: input = ``input_tokens`` +
  ``cache_creation_input_tokens`` + ``cache_read_input_tokens``, cached =
  ``cache_read_input_tokens``.

Each format has its module, which says where the format is documented (and each
provider's fixture under ``tests/fixtures/agent-streams/`` has a ``.md`` saying so too):
``native`` (our own agents), ``codex``, ``claude`` (``claude-code`` and ``qoder``, which
prints the same stream) and ``kimi``; ``common`` holds what they share, and ``formats``
the parser of each format (``PARSERS``) and of each provider (``parser_for``).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ClaudeCodeParser": "evopolicygym.agents.streams.claude",
    "QoderParser": "evopolicygym.agents.streams.claude",
    "synthetic_fault": "evopolicygym.agents.streams.claude",
    "CodexParser": "evopolicygym.agents.streams.codex",
    "StreamParser": "evopolicygym.agents.streams.common",
    "anthropic_usage": "evopolicygym.agents.streams.common",
    "openai_usage": "evopolicygym.agents.streams.common",
    "token_count": "evopolicygym.agents.streams.common",
    "tool_arguments": "evopolicygym.agents.streams.common",
    "PARSERS": "evopolicygym.agents.streams.formats",
    "parser_for": "evopolicygym.agents.streams.formats",
    "KimiParser": "evopolicygym.agents.streams.kimi",
    "NativeParser": "evopolicygym.agents.streams.native",
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
