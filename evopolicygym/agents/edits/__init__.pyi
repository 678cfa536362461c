# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.agents.edits.constants import FROZEN_NAMES as FROZEN_NAMES
from evopolicygym.agents.edits.constants import EditKind as EditKind
from evopolicygym.agents.edits.constants import NumericConstant as NumericConstant
from evopolicygym.agents.edits.constants import apply_step as apply_step
from evopolicygym.agents.edits.constants import classify_edit as classify_edit
from evopolicygym.agents.edits.constants import detect_template as detect_template
from evopolicygym.agents.edits.constants import find_constants as find_constants
from evopolicygym.agents.edits.constants import format_number as format_number
from evopolicygym.agents.edits.constants import mutate_constants as mutate_constants
from evopolicygym.agents.edits.constants import replace_constants as replace_constants
from evopolicygym.agents.edits.constants import strip_constants as strip_constants
from evopolicygym.agents.edits.fitting import fit_template as fit_template
from evopolicygym.agents.edits.probe import PROBE_SCRIPT as PROBE_SCRIPT
from evopolicygym.agents.edits.probe import ProbeResult as ProbeResult
from evopolicygym.agents.edits.probe import run_probe as run_probe
from evopolicygym.agents.edits.spaces import SpaceInfo as SpaceInfo
from evopolicygym.agents.edits.spaces import space_info as space_info
from evopolicygym.agents.edits.templates import TEMPLATE_DESCRIPTIONS as TEMPLATE_DESCRIPTIONS
from evopolicygym.agents.edits.templates import TemplateFit as TemplateFit
from evopolicygym.agents.edits.templates import render_template as render_template
from evopolicygym.agents.edits.templates import template_library as template_library

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
