"""Event JSON Schemas (checked in, generated from the code) and upcasting of old payloads."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from evopolicygym.records import events
from evopolicygym.records.events import (
    EVENT_TYPES,
    AgentStarted,
    Event,
    EventCodecError,
    NewEvent,
    decode_event,
    encode_payload,
    event_schema,
    register_upcaster,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.schemas import check_schemas, render_schemas, write_schemas
from evopolicygym.records.verify import verify_store

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas" / "events"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# --------------------------------------------------------------------------- checked-in schemas


def test_checked_in_schemas_match_the_code() -> None:
    problems = check_schemas(SCHEMAS)
    assert problems == [], (
        "schemas/events/ drifted from evopolicygym/records/events.py; regenerate with "
        "'evopolicy record schema' at the repository root:\n" + "\n".join(problems)
    )


def test_every_event_type_has_a_schema_file() -> None:
    files = {path.stem for path in SCHEMAS.glob("*.json")}
    assert set(EVENT_TYPES) <= files, sorted(set(EVENT_TYPES) - files)
    assert files <= set(EVENT_TYPES), sorted(files - set(EVENT_TYPES))
    for name, cls in EVENT_TYPES.items():
        schema = json.loads((SCHEMAS / f"{name}.json").read_text())
        assert schema["title"] == name
        assert schema["x-schema-version"] == cls.SCHEMA_VERSION
        assert name in schema["$defs"]


def test_schema_files_are_canonical() -> None:
    for name, text in render_schemas().items():
        assert text.endswith("}\n")
        value = json.loads(text)
        assert text == json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", name


def test_check_names_drifted_missing_and_extra(tmp_path: Path) -> None:
    written = write_schemas(tmp_path)
    assert len(written) == len(EVENT_TYPES)
    assert check_schemas(tmp_path) == []
    assert write_schemas(tmp_path) == []  # unchanged files are left alone
    (tmp_path / "RunCreated.json").write_text('{"title": "RunCreated"}\n')
    (tmp_path / "RunFinished.json").unlink()
    (tmp_path / "Gone.json").write_text('{"title": "Gone", "x-schema-version": 1}\n')
    (tmp_path / "notes.json").write_text("[]\n")
    problems = check_schemas(tmp_path)
    assert len(problems) == 4
    assert any("RunCreated.json" in p and "drifted" in p for p in problems)
    assert any("RunFinished.json" in p and "missing" in p for p in problems)
    assert any("Gone.json" in p and "extra" in p for p in problems)
    # Regenerating removes stale generated files but leaves other JSON alone.
    write_schemas(tmp_path)
    assert not (tmp_path / "Gone.json").exists()
    assert [p for p in check_schemas(tmp_path)] == [
        f"{tmp_path / 'notes.json'}: extra (no event type 'notes')"
    ]


def test_check_on_a_missing_directory(tmp_path: Path) -> None:
    problems = check_schemas(tmp_path / "absent")
    assert len(problems) == len(EVENT_TYPES)
    assert all(p.endswith(": missing") for p in problems)


# --------------------------------------------------------------------------- upcasting v1 -> v2


V1_FIXTURE = FIXTURES / "AgentStarted-v1.json"


class AgentStartedV2(Event, frozen=True, kw_only=True):
    """What AgentStarted might become: v2 records the sandbox the Agent ran in (required)."""

    SCHEMA_VERSION = 2

    attempt: int
    command: list[str] = msgspec.field(default_factory=list)
    pid: int | None = None
    sandbox: str

    @classmethod
    def type_name(cls) -> str:
        return "AgentStarted"


def upcast_agent_started_v1(payload: dict[str, object]) -> dict[str, object]:
    return {**payload, "sandbox": "unrecorded"}


@pytest.fixture
def v2_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """AgentStarted at v2 with a v1 upcaster, for this test only."""
    # A private copy of the upcaster registry, so the registration below does not outlive the test.
    monkeypatch.setattr(events, "_UPCASTERS", dict(events._UPCASTERS))
    monkeypatch.setitem(EVENT_TYPES, "AgentStarted", AgentStartedV2)
    register_upcaster("AgentStarted", 1)(upcast_agent_started_v1)


def test_fixture_is_a_stored_v1_payload() -> None:
    """The fixture is what the code wrote for AgentStarted v1 (canonical JSON); an optional
    field added since (``tools``, None where not recorded) reads back as its default, so
    the payload stays v1 and only gains that key when written again."""
    raw = V1_FIXTURE.read_bytes().strip()
    assert AgentStarted.SCHEMA_VERSION == 1
    current = decode_event("AgentStarted", 1, raw)
    assert isinstance(current, AgentStarted) and current.tools is None
    assert msgspec.json.decode(encode_payload(current)) == {
        **msgspec.json.decode(raw),
        "tools": None,
    }


def test_v1_payload_is_upcast_to_v2(v2_catalogue: None) -> None:
    raw = V1_FIXTURE.read_bytes()
    event = decode_event("AgentStarted", 1, raw)
    assert isinstance(event, AgentStartedV2)
    assert event.sandbox == "unrecorded"  # the new field, from the upcaster
    assert (event.attempt, event.command, event.pid) == (2, ["codex", "exec", "--json"], 4242)
    # A v2 payload decodes directly, without the upcaster.
    v2 = encode_payload(AgentStartedV2(attempt=3, sandbox="userns"))
    direct = decode_event("AgentStarted", 2, v2)
    assert isinstance(direct, AgentStartedV2) and direct.sandbox == "userns"
    assert event_schema(AgentStartedV2)["x-schema-version"] == 2


def test_v1_payload_in_a_store_reads_as_v2(v2_catalogue: None, tmp_path: Path) -> None:
    raw = V1_FIXTURE.read_bytes().strip()
    with open_store(tmp_path / "store", create=True) as store:
        store.events.append("run-old", [NewEvent("run-old/1", "AgentStarted", 1, raw)], 0)
        [envelope] = list(store.events.read_stream("run-old"))
        assert envelope.schema_version == 1 and envelope.payload == raw  # stored as written
        event = envelope.event()
        assert isinstance(event, AgentStartedV2) and event.sandbox == "unrecorded"
        assert envelope.data() == json.loads(raw)  # data() is the stored payload, not upcast
        report = verify_store(store)
        assert report.ok, report.problems


def test_no_upcaster_is_a_codec_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "_UPCASTERS", {})
    monkeypatch.setitem(EVENT_TYPES, "AgentStarted", AgentStartedV2)
    with pytest.raises(EventCodecError, match="no upcaster for AgentStarted v1 -> v2"):
        decode_event("AgentStarted", 1, V1_FIXTURE.read_bytes())
    with pytest.raises(EventCodecError, match="newer than this code"):
        decode_event("AgentStarted", 3, V1_FIXTURE.read_bytes())


def test_an_upcaster_that_leaves_a_field_out_is_a_codec_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events, "_UPCASTERS", {})
    monkeypatch.setitem(EVENT_TYPES, "AgentStarted", AgentStartedV2)
    register_upcaster("AgentStarted", 1)(lambda payload: payload)
    with pytest.raises(EventCodecError, match="sandbox"):
        decode_event("AgentStarted", 1, V1_FIXTURE.read_bytes())


def test_the_v2_test_type_left_the_real_catalogue_alone() -> None:
    assert EVENT_TYPES["AgentStarted"] is AgentStarted
    assert ("AgentStarted", 1) not in events._UPCASTERS
    assert msgspec.json.decode(V1_FIXTURE.read_bytes())["pid"] == 4242
