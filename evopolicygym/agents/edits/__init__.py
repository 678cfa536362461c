"""Program edits for the reference agent: constants, rule templates, probes, edit kinds.

Two kinds of edit change a policy program:

- a **parametric** edit keeps the program's structure and perturbs its tunable numeric
  constants (floats found with ``ast``; ints are left alone, since in a policy they are
  usually actions, indices or counts);
- a **synthesis** edit replaces the rule structure with a template from a small library
  chosen from the observation and action spaces, seeded by fitting the template to what
  the current program does on probe observations (behaviour cloning), so it starts close
  to the current behaviour.

``classify_edit`` tells the two apart by comparing ASTs with numeric constants stripped.
Generated programs are self-contained, stdlib-only ``policy.py`` files.

One module per concern, lowest first: ``constants`` (numeric constants, edit kinds),
``spaces`` (``SpaceInfo``), ``templates`` (the library, ``TemplateFit``, rendering),
``fitting`` (``fit_template``) and ``probe`` (``PROBE_SCRIPT``, ``run_probe``).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "FROZEN_NAMES": "evopolicygym.agents.edits.constants",
    "EditKind": "evopolicygym.agents.edits.constants",
    "NumericConstant": "evopolicygym.agents.edits.constants",
    "apply_step": "evopolicygym.agents.edits.constants",
    "classify_edit": "evopolicygym.agents.edits.constants",
    "detect_template": "evopolicygym.agents.edits.constants",
    "find_constants": "evopolicygym.agents.edits.constants",
    "format_number": "evopolicygym.agents.edits.constants",
    "mutate_constants": "evopolicygym.agents.edits.constants",
    "replace_constants": "evopolicygym.agents.edits.constants",
    "strip_constants": "evopolicygym.agents.edits.constants",
    "fit_template": "evopolicygym.agents.edits.fitting",
    "PROBE_SCRIPT": "evopolicygym.agents.edits.probe",
    "ProbeResult": "evopolicygym.agents.edits.probe",
    "run_probe": "evopolicygym.agents.edits.probe",
    "SpaceInfo": "evopolicygym.agents.edits.spaces",
    "space_info": "evopolicygym.agents.edits.spaces",
    "TEMPLATE_DESCRIPTIONS": "evopolicygym.agents.edits.templates",
    "TemplateFit": "evopolicygym.agents.edits.templates",
    "render_template": "evopolicygym.agents.edits.templates",
    "template_library": "evopolicygym.agents.edits.templates",
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
