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

from evopolicygym.agents.edits.constants import (
    FROZEN_NAMES,
    EditKind,
    NumericConstant,
    apply_step,
    classify_edit,
    detect_template,
    find_constants,
    format_number,
    mutate_constants,
    replace_constants,
    strip_constants,
)
from evopolicygym.agents.edits.fitting import fit_template
from evopolicygym.agents.edits.probe import PROBE_SCRIPT, ProbeResult, run_probe
from evopolicygym.agents.edits.spaces import SpaceInfo, space_info
from evopolicygym.agents.edits.templates import (
    TEMPLATE_DESCRIPTIONS,
    TemplateFit,
    render_template,
    template_library,
)

__all__ = [
    "FROZEN_NAMES",
    "PROBE_SCRIPT",
    "TEMPLATE_DESCRIPTIONS",
    "EditKind",
    "NumericConstant",
    "ProbeResult",
    "SpaceInfo",
    "TemplateFit",
    "apply_step",
    "classify_edit",
    "detect_template",
    "find_constants",
    "fit_template",
    "format_number",
    "mutate_constants",
    "render_template",
    "replace_constants",
    "run_probe",
    "space_info",
    "strip_constants",
    "template_library",
]
