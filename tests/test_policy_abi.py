"""The Policy ABI module stays a stdlib-only leaf, and its types validate themselves."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import evopolicygym
import evopolicygym.policy as policy_module
from evopolicygym.policy import Policy, PolicyContext, TensorValue

_PROBE = (
    "import json, sys\n"
    "before = set(sys.modules)\n"
    "{stmt}\n"
    "print(json.dumps(sorted(set(sys.modules) - before)))\n"
)


def _new_modules(stmt: str) -> set[str]:
    """Modules that ``stmt`` adds to a fresh interpreter's ``sys.modules``."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(stmt=stmt)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(out.stdout))


def test_importing_policy_loads_only_stdlib_and_itself():
    added = _new_modules("import evopolicygym.policy")
    assert "evopolicygym.policy" in added  # the probe really imported it
    third_party = {m for m in added if m.split(".")[0] not in sys.stdlib_module_names}
    assert third_party == {"evopolicygym", "evopolicygym.policy"}
    for heavy in ("numpy", "msgspec", "gymnasium", "evopolicygym.values"):
        assert heavy not in added


def test_importing_package_root_is_light():
    added = _new_modules("import evopolicygym")
    third_party = {m for m in added if m.split(".")[0] not in sys.stdlib_module_names}
    assert third_party == {"evopolicygym"}


def test_probe_detects_heavy_imports():
    # guard against a vacuous probe: importing values.py must pull in numpy and msgspec
    added = _new_modules("import evopolicygym.values")
    assert {"numpy", "msgspec"} <= {m.split(".")[0] for m in added}


def _imported_roots(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots += [(alias.name.split(".")[0], 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            roots.append(((node.module or "").split(".")[0], node.level))
    return roots


def test_policy_source_imports_only_stdlib():
    roots = _imported_roots(Path(policy_module.__file__))
    assert roots, "expected at least the dataclasses/typing imports"
    for name, level in roots:
        assert level == 0, "policy.py must not use relative imports"
        assert name == "__future__" or name in sys.stdlib_module_names, name


def test_package_init_imports_only_stdlib():
    for name, level in _imported_roots(Path(evopolicygym.__file__)):
        assert level == 0
        assert name == "__future__" or name in sys.stdlib_module_names, name


# --- TensorValue ---------------------------------------------------------------------------


def test_tensor_value_valid():
    t = TensorValue("<f4", (2, 0, 3), b"")
    assert t.dtype == "<f4"
    assert t.shape == (2, 0, 3)
    assert t.data == b""
    assert TensorValue("<i8", (), b"\0" * 8).shape == ()
    assert t == TensorValue("<f4", (2, 0, 3), b"")
    assert t != TensorValue("<f4", (2, 0, 3), b"x")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtype": "", "shape": (1,), "data": b"\0"},
        {"dtype": None, "shape": (1,), "data": b"\0"},
        {"dtype": b"<f4", "shape": (1,), "data": b"\0"},
        {"dtype": "<f4", "shape": (-1,), "data": b""},
        {"dtype": "<f4", "shape": (1.0,), "data": b"\0" * 4},
        {"dtype": "<f4", "shape": ("1",), "data": b"\0" * 4},
        {"dtype": "<f4", "shape": (2, -3), "data": b""},
        {"dtype": "<f4", "shape": (1,), "data": bytearray(4)},
        {"dtype": "<f4", "shape": (1,), "data": memoryview(b"\0" * 4)},
        {"dtype": "<f4", "shape": (1,), "data": "abcd"},
        {"dtype": "<f4", "shape": (1,), "data": None},
    ],
)
def test_tensor_value_rejects(kwargs):
    with pytest.raises(ValueError):
        TensorValue(**kwargs)


def test_tensor_value_frozen_and_slotted():
    t = TensorValue("<f4", (1,), b"\0" * 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.data = b"\1" * 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.shape = (4,)  # type: ignore[misc]
    assert not hasattr(t, "__dict__")
    assert hash(t) == hash(TensorValue("<f4", (1,), b"\0" * 4))


# --- PolicyContext and Policy ----------------------------------------------------------------


def test_policy_context_frozen():
    ctx = PolicyContext(
        observation_space={"type": "box"},
        action_space={"type": "discrete", "n": 2, "start": 0},
        policy_seed=42,
    )
    assert ctx.policy_seed == 42
    assert ctx.metadata == {}
    assert ctx.environment_parameters == {}
    for name, value in [("policy_seed", 1), ("action_space", None), ("metadata", {"a": 1})]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(ctx, name, value)
    assert not hasattr(ctx, "__dict__")


def test_policy_context_defaults_not_shared():
    a = PolicyContext(None, None, 0)
    b = PolicyContext(None, None, 0)
    a.metadata["x"] = 1
    a.environment_parameters["y"] = 2
    assert b.metadata == {}
    assert b.environment_parameters == {}


def test_policy_context_requires_fields():
    with pytest.raises(TypeError):
        PolicyContext(observation_space=None, action_space=None)  # type: ignore[call-arg]


def test_policy_protocol_runtime_check():
    class Good:
        def act(self, observation):
            return 0

    class Bad:
        def step(self, observation):
            return 0

    assert isinstance(Good(), Policy)
    assert not isinstance(Bad(), Policy)
