"""Agent stdout streams (agents/streams/): each CLI's documented JSON lines, normalized.

Each ``tests/fixtures/agent-streams/<provider>-session.jsonl`` is a small session in that
CLI's own format (its ``.md`` says where the format is documented): read the policy, edit
it, ``evopolicy session submit --episodes 0:4``, read the result, finish. Replaying one must
give exactly the messages below, count what it could not use, and never raise on anything.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym.agents.streams import PARSERS, NativeParser, StreamParser, parser_for
from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage

FIXTURES = Path(__file__).parent / "fixtures" / "agent-streams"
PROVIDERS = ("native", "codex", "claude-code", "kimi", "qoder")

# --------------------------------------------------------------------------- the session

POLICY_BEFORE = (
    '"""CartPole: push the cart right, whatever happens."""\n'
    "\n"
    "\n"
    "def make_policy(context):\n"
    "    return Policy()\n"
    "\n"
    "\n"
    "class Policy:\n"
    "    def act(self, observation):\n"
    "        return 1\n"
)
OLD_BODY = "        return 1\n"
NEW_BODY = (
    "        x, x_dot, theta, theta_dot = observation\n"
    "        return 1 if theta + 0.5 * theta_dot > 0 else 0\n"
)
POLICY_AFTER = POLICY_BEFORE.replace(OLD_BODY, NEW_BODY)
SUBMIT = "evopolicy session submit --episodes 0:4"
FINISH = "evopolicy session finish 1"


def numbered(text: str, separator: str = "\t") -> str:
    """A file as read tools print it: right-aligned line numbers."""
    return "\n".join(f"{n:>6}{separator}{line}" for n, line in enumerate(text.splitlines(), 1))


def pretty(value: Any) -> str:
    """JSON as ``evopolicy session`` prints it on stdout."""
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2).decode() + "\n"


SUBMIT_DOC = {
    "artifacts": [],
    "budget_left": 60,
    "budget_reserved": 4,
    "budget_used": 4,
    "content": {},
    "episodes": [
        {
            "failure": None,
            "index": index,
            "output_tail": "",
            "status": "completed",
            "steps": steps,
            "total_reward": float(steps),
        }
        for index, steps in enumerate((500, 500, 487, 500))
    ],
    "error": None,
    "failures": 0,
    "feedback_path": "feedback/submission-0001/feedback.json",
    "indices": [0, 1, 2, 3],
    "parent_program_digest": hashlib.sha256(POLICY_BEFORE.encode()).hexdigest(),
    "program_digest": hashlib.sha256(POLICY_AFTER.encode()).hexdigest(),
    "score": 496.75,
    "status": "published",
    "submission_id": 1,
}
SUBMIT_REPLY = pretty(SUBMIT_DOC)
FINISH_REPLY = pretty({"accepted": True, "candidates": [1]})


def replay(provider: str) -> tuple[list[Message], dict[str, int]]:
    parser = PARSERS[provider]()
    messages: list[Message] = []
    for line in (FIXTURES / f"{provider}-session.jsonl").read_bytes().split(b"\n"):
        messages += parser.feed(line)
    messages += parser.close()
    return messages, parser.unknown


def call(call_id: str, name: str, arguments: dict[str, Any], content: str = "") -> Message:
    return Message(
        role="assistant",
        content=content,
        tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
    )


def result(call_id: str, name: str | None, content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id=call_id, name=name)


def with_(message: Message, **changes: Any) -> Message:
    return msgspec.structs.replace(message, **changes)


# --------------------------------------------------------------------------- expected transcripts

NATIVE_EXPECTED = [
    with_(
        call("call_0001", "read_file", {"path": "program/policy.py"}, "Reading the policy first."),
        at=1754400000000000000,
    ),
    with_(result("call_0001", "read_file", POLICY_BEFORE), at=1754400000100000000),
    with_(
        call(
            "call_0002",
            "write_file",
            {"path": "program/policy.py", "content": POLICY_AFTER},
            "A PD controller on the pole angle.",
        ),
        at=1754400001000000000,
    ),
    with_(result("call_0002", "write_file", "wrote program/policy.py"), at=1754400001100000000),
    with_(call("call_0003", "bash", {"command": SUBMIT}), at=1754400002000000000),
    with_(result("call_0003", "bash", SUBMIT_REPLY), at=1754400009000000000),
    with_(call("call_0004", "bash", {"command": FINISH}), at=1754400010000000000),
    with_(result("call_0004", "bash", FINISH_REPLY), at=1754400010200000000),
    Message(
        role="assistant",
        content="Finished with submission 1 (score 496.75).",
        usage=Usage(input_tokens=120, output_tokens=40, cached_tokens=10),
        at=1754400010300000000,
    ),
]

CODEX_FINAL = (
    "The PD controller scored 496.75 on Episodes 0-3 with 60 Episodes of budget left; "
    "I finished the Run with submission 1 as the only candidate."
)
CODEX_EXPECTED = [
    with_(
        call("item_1", "shell", {"command": "bash -lc 'cat program/policy.py'"}),
        reasoning="**Reading the current policy**\n\n"
        "I should look at program/policy.py before changing anything.",
    ),
    result("item_1", "shell", POLICY_BEFORE + "[exit code 0]"),
    with_(
        call(
            "item_4", "apply_patch", {"changes": [{"path": "program/policy.py", "kind": "update"}]}
        ),
        reasoning="**Writing a PD controller**",
    ),
    result("item_4", "apply_patch", "update program/policy.py\n[completed]"),
    call("item_5", "shell", {"command": f"bash -lc '{SUBMIT}'"}),
    result("item_5", "shell", SUBMIT_REPLY + "[exit code 0]"),
    with_(
        call(
            "item_7", "shell", {"command": "bash -lc 'jq .score,.budget_left feedback/latest.json'"}
        ),
        reasoning="**Checking the feedback**",
    ),
    result("item_7", "shell", "496.75\n60\n[exit code 0]"),
    call("item_8", "shell", {"command": f"bash -lc '{FINISH}'"}),
    result("item_8", "shell", FINISH_REPLY + "[exit code 0]"),
    Message(
        role="assistant",
        content=CODEX_FINAL,
        usage=Usage(input_tokens=48210, output_tokens=1893, cached_tokens=41344),
    ),
]

CLAUDE_POLICY = "/workspace/program/policy.py"
CLAUDE_EDIT = {
    "file_path": CLAUDE_POLICY,
    "old_string": OLD_BODY.rstrip("\n"),
    "new_string": NEW_BODY.rstrip("\n"),
}
CLAUDE_SUBMIT = {"command": SUBMIT, "description": "Submit the policy on Episodes 0-3"}
CLAUDE_FINISH = {"command": FINISH, "description": "Finish the Run with submission 1"}
CLAUDE_SCORE = (
    "Submission 1 scored 496.75 on Episodes 0-3 (above the 475 success threshold) "
    "with 60 Episodes of budget left. I'll finish with it."
)
CLAUDE_FINAL = "Done: the PD controller (submission 1) is the final candidate."
# Anthropic usage per API message: (input, cache creation, cache read, output).
CLAUDE_USAGE = [(3, 4210, 11893, 187), (1, 412, 16103, 402), (1, 620, 16515, 96)]
CLAUDE_USAGE += [(1, 1034, 17135, 143), (1, 122, 18169, 58)]


def anthropic(usage: tuple[int, int, int, int]) -> Usage:
    fresh, created, read, output = usage
    return Usage(
        input_tokens=fresh + created + read,
        output_tokens=output,
        cached_tokens=read,
        cache_write_tokens=created,
    )


CLAUDE_EXPECTED = [
    Message(
        role="assistant",
        content="I'll read the current policy first.",
        reasoning="The task is to improve program/policy.py for CartPole; "
        "let me see what it does now.",
        tool_calls=[
            ToolCall(id="toolu_01Read", name="Read", arguments={"file_path": CLAUDE_POLICY})
        ],
        usage=anthropic(CLAUDE_USAGE[0]),
    ),
    result("toolu_01Read", "Read", numbered(POLICY_BEFORE, "→")),
    Message(
        role="assistant",
        reasoning="It always pushes right, so the pole falls within a few dozen steps. "
        "A PD controller on the pole angle and its rate should balance it.",
        tool_calls=[ToolCall(id="toolu_01Edit", name="Edit", arguments=CLAUDE_EDIT)],
        usage=anthropic(CLAUDE_USAGE[1]),
    ),
    result("toolu_01Edit", "Edit", f"The file {CLAUDE_POLICY} has been updated successfully."),
    with_(call("toolu_01Submit", "Bash", CLAUDE_SUBMIT), usage=anthropic(CLAUDE_USAGE[2])),
    result("toolu_01Submit", "Bash", SUBMIT_REPLY.rstrip("\n")),
    with_(
        call("toolu_01Finish", "Bash", CLAUDE_FINISH, CLAUDE_SCORE),
        usage=anthropic(CLAUDE_USAGE[3]),
    ),
    result("toolu_01Finish", "Bash", FINISH_REPLY.rstrip("\n")),
    Message(role="assistant", content=CLAUDE_FINAL, usage=anthropic(CLAUDE_USAGE[4])),
]

KIMI_STR_REPLACE = {"path": "program/policy.py", "edit": {"old": OLD_BODY, "new": NEW_BODY}}
KIMI_SCORE = "Submission 1 scored 496.75 on Episodes 0-3; 60 Episodes of budget are left."
KIMI_FINAL = "I finished the Run with submission 1 (score 496.75) as the only candidate."
KIMI_EXPECTED = [
    Message(
        role="assistant",
        content="Let me look at the current policy.",
        reasoning="I need to see the current policy before changing it.",
        tool_calls=[
            ToolCall(id="ReadFile:0", name="ReadFile", arguments={"path": "program/policy.py"})
        ],
    ),
    result(
        "ReadFile:0",
        "ReadFile",
        "<system>10 lines read from file starting from line 1. End of file reached.</system>\n"
        + numbered(POLICY_BEFORE),
    ),
    Message(
        role="assistant",
        reasoning="It always pushes right. A PD controller on theta and theta_dot will do.",
        tool_calls=[
            ToolCall(id="StrReplaceFile:1", name="StrReplaceFile", arguments=KIMI_STR_REPLACE)
        ],
    ),
    result(
        "StrReplaceFile:1",
        "StrReplaceFile",
        "<system>File successfully edited. Applied 1 edit(s) with 1 total replacement(s).</system>",
    ),
    call("Shell:2", "Shell", {"command": SUBMIT}),
    result("Shell:2", "Shell", SUBMIT_REPLY),
    call("Shell:3", "Shell", {"command": FINISH}, KIMI_SCORE),
    result("Shell:3", "Shell", "<system>Command executed successfully.</system>\n" + FINISH_REPLY),
    Message(role="assistant", content=KIMI_FINAL),
]

QODER_POLICY = "/workspace/program/policy.py"
QODER_FINAL = "Finished: submission 1 (score 496.75) is the final candidate."
# Per-message usage as printed; output_tokens is a streaming placeholder, so the result's
# totals decide: the last message takes the difference.
QODER_USAGE = [(9120, 42), (9873, 17), (10410, 11), (10981, 23), (11502, 3)]
QODER_RESULT_OUTPUT = 1187
QODER_EXPECTED = [
    Message(
        role="assistant",
        content="Let me read the policy first.",
        reasoning="I should read program/policy.py before editing it.",
        tool_calls=[ToolCall(id="call_q01", name="Read", arguments={"file_path": QODER_POLICY})],
        usage=Usage(input_tokens=9120, output_tokens=42),
    ),
    result("call_q01", "Read", numbered(POLICY_BEFORE)),
    with_(
        call(
            "call_q02",
            "Edit",
            {
                "file_path": QODER_POLICY,
                "old_string": OLD_BODY.rstrip("\n"),
                "new_string": NEW_BODY.rstrip("\n"),
            },
        ),
        usage=Usage(input_tokens=9873, output_tokens=17),
    ),
    result("call_q02", "Edit", f"The file {QODER_POLICY} has been updated."),
    with_(
        call("call_q03", "Bash", {"command": SUBMIT}),
        usage=Usage(input_tokens=10410, output_tokens=11),
    ),
    result("call_q03", "Bash", SUBMIT_REPLY.rstrip("\n")),
    with_(
        call(
            "call_q04",
            "Bash",
            {"command": FINISH},
            "Score 496.75 with 60 Episodes left; finishing.",
        ),
        usage=Usage(input_tokens=10981, output_tokens=23),
    ),
    result("call_q04", "Bash", FINISH_REPLY.rstrip("\n")),
    Message(
        role="assistant",
        content=QODER_FINAL,
        usage=Usage(input_tokens=11502, output_tokens=QODER_RESULT_OUTPUT - (42 + 17 + 11 + 23)),
    ),
]

EXPECTED = {
    "native": (NATIVE_EXPECTED, {"text": 3}),
    "codex": (CODEX_EXPECTED, {"item:todo_list": 1, "malformed": 1}),
    "claude-code": (CLAUDE_EXPECTED, {"tool_progress": 1, "malformed": 1}),
    "kimi": (KIMI_EXPECTED, {"meta:session.resume_hint": 1, "malformed": 1}),
    "qoder": (
        QODER_EXPECTED,
        {"system:hook_started": 1, "system:hook_response": 1, "malformed": 1},
    ),
}


# --------------------------------------------------------------------------- fixtures replayed


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fixture_gives_exactly_the_expected_transcript(provider: str) -> None:
    messages, _ = replay(provider)
    expected, _ = EXPECTED[provider]
    assert [m.role for m in messages] == [m.role for m in expected]
    for got, want in zip(messages, expected, strict=True):
        assert got == want


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fixture_unknown_kinds_are_counted_not_dropped(provider: str) -> None:
    _, unknown = replay(provider)
    assert unknown == EXPECTED[provider][1]
    assert (FIXTURES / f"{provider}-session.md").is_file()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fixture_tool_results_pair_with_calls(provider: str) -> None:
    messages, _ = replay(provider)
    open_calls: dict[str, str] = {}
    answered = 0
    for message in messages:
        if message.role == "assistant":
            for tool_call in message.tool_calls:
                assert tool_call.id not in open_calls
                open_calls[tool_call.id] = tool_call.name
        elif message.role == "tool":
            assert message.tool_call_id in open_calls, message
            assert open_calls.pop(message.tool_call_id) == message.name
            answered += 1
    assert not open_calls
    # read, edit, submit, finish; Codex also reads the feedback with a command of its own.
    assert answered == (5 if provider == "codex" else 4)


def test_codex_fixture_has_five_answered_calls() -> None:
    messages, _ = replay("codex")
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    assert calls == results == ["item_1", "item_4", "item_5", "item_7", "item_8"]


def test_usage_totals_match_each_clis_own_totals() -> None:
    def total(provider: str) -> Usage:
        usage = Usage()
        for message in replay(provider)[0]:
            if message.usage is not None:
                usage = Usage(
                    input_tokens=usage.input_tokens + message.usage.input_tokens,
                    output_tokens=usage.output_tokens + message.usage.output_tokens,
                    cached_tokens=usage.cached_tokens + message.usage.cached_tokens,
                )
        return usage

    # codex: turn.completed; claude-code and qoder: the result line's usage.
    assert total("codex") == Usage(input_tokens=48210, output_tokens=1893, cached_tokens=41344)
    fresh, created, read, output = (sum(u[i] for u in CLAUDE_USAGE) for i in range(4))
    assert total("claude-code") == Usage(
        input_tokens=fresh + created + read, output_tokens=output, cached_tokens=read
    )
    assert total("qoder") == Usage(
        input_tokens=sum(u[0] for u in QODER_USAGE), output_tokens=QODER_RESULT_OUTPUT
    )
    assert total("kimi") == Usage()  # Kimi prints no usage


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fixture_messages_encode_and_leave_the_time_to_the_host(provider: str) -> None:
    messages, _ = replay(provider)
    for message in messages:
        assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message
        if provider != "native":
            assert message.at == 0


def test_lines_may_keep_their_newline_and_carriage_return() -> None:
    for provider in PROVIDERS:
        parser = PARSERS[provider]()
        messages: list[Message] = []
        for line in (FIXTURES / f"{provider}-session.jsonl").read_bytes().splitlines(True):
            messages += parser.feed(line.replace(b"\n", b"\r\n"))
        messages += parser.close()
        assert messages == EXPECTED[provider][0]


# --------------------------------------------------------------------------- registry


def test_parser_for_maps_providers_to_formats() -> None:
    for provider in ("reference", "command", "chat", "native"):
        assert isinstance(parser_for(provider), NativeParser)
    for provider in ("codex", "claude-code", "kimi", "qoder"):
        assert type(parser_for(provider)) is PARSERS[provider]
    parser = parser_for("codex")
    assert parser is not parser_for("codex")  # fresh state each time
    with pytest.raises(ValueError, match="no stream parser"):
        parser_for("gemini")


# --------------------------------------------------------------------------- native


def process_py_reading(line: bytes) -> list[Message]:
    """What ``agents/process.py`` makes of a complete stdout line (``_read``), ``at`` aside."""
    stripped = line.strip()
    if stripped.startswith(b"{"):
        try:
            return [msgspec.json.decode(stripped, type=Message)]
        except (msgspec.DecodeError, RecursionError):  # process.py: DecodeError only
            return []
    return []


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
small_ints = st.integers(min_value=0, max_value=2**63 - 1)
messages_ = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.text(max_size=40),
    reasoning=st.none() | st.text(max_size=20),
    tool_calls=st.lists(
        st.builds(
            ToolCall,
            id=st.text(max_size=8),
            name=st.text(max_size=8),
            arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        ),
        max_size=2,
    ),
    tool_call_id=st.none() | st.text(max_size=8),
    name=st.none() | st.text(max_size=8),
    usage=st.none()
    | st.builds(Usage, input_tokens=small_ints, output_tokens=small_ints, cached_tokens=small_ints),
    at=st.integers(min_value=0, max_value=2**63 - 1),
)


@given(messages_)
def test_native_reads_message_json_round_trips(message: Message) -> None:
    parser = NativeParser()
    assert parser.feed(msgspec.json.encode(message)) == [message]
    assert parser.feed(b"  " + msgspec.json.encode(message) + b"\r") == [message]
    assert parser.close() == []
    assert parser.unknown == {}


@given(
    st.binary(max_size=300)
    | json_values.map(msgspec.json.encode)
    | messages_.map(msgspec.json.encode)
)
def test_native_matches_process_py(line: bytes) -> None:
    parser = NativeParser()
    got = parser.feed(line)
    assert got == process_py_reading(line)
    if not got and line.strip():
        assert parser.unknown == {"text": 1}


# --------------------------------------------------------------------------- never raises


def check_outputs(parser: StreamParser, messages: list[Message]) -> None:
    for message in messages:
        assert isinstance(message, Message)
        assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message
        for tool_call in message.tool_calls:
            assert isinstance(tool_call.arguments, dict)
    assert "parser-error" not in parser.unknown
    assert all(isinstance(k, str) and v > 0 for k, v in parser.unknown.items())


def run_lines(provider: str, lines: list[bytes]) -> None:
    parser = PARSERS[provider]()
    messages: list[Message] = []
    for line in lines:
        messages += parser.feed(line)
    messages += parser.close()
    check_outputs(parser, messages)


@pytest.mark.parametrize("provider", PROVIDERS)
@given(lines=st.lists(st.binary(max_size=200), max_size=8))
def test_arbitrary_bytes_never_raise(provider: str, lines: list[bytes]) -> None:
    run_lines(provider, lines)


@pytest.mark.parametrize("provider", PROVIDERS)
@given(values=st.lists(json_values, max_size=8))
def test_arbitrary_json_never_raises(provider: str, values: list[Any]) -> None:
    run_lines(provider, [msgspec.json.encode(v) for v in values])


anything = json_values | st.text(max_size=10)


def mostly(right: Any) -> Any:
    """Usually a value of the right shape, now and then anything at all."""
    return st.one_of(right, right, right, right, anything)


def obj(**fields: Any) -> Any:
    """An object with these fields, each usually right, sometimes wrong or missing."""
    return st.fixed_dictionaries(
        {k: mostly(v) for k, v in fields.items()}, optional={"extra": anything}
    ).flatmap(
        lambda d: st.sets(st.sampled_from(sorted(d)), max_size=1).map(
            lambda dropped: {k: v for k, v in d.items() if k not in dropped or k == "type"}
        )
    )


texts = st.text(max_size=12)
ids = st.sampled_from(["a", "b", "item_1", "toolu_1", ""])
arguments_ = st.dictionaries(st.text(max_size=5), json_values, max_size=3) | texts
usage_like = st.dictionaries(
    st.sampled_from(
        [
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ]
    ),
    mostly(st.integers()),
)
text_blocks = st.lists(obj(type=st.sampled_from(["text", "image"]), text=texts), max_size=3)
codex_items = st.one_of(
    obj(id=ids, type=st.just("agent_message"), text=texts),
    obj(id=ids, type=st.just("reasoning"), text=texts),
    obj(
        id=ids,
        type=st.just("command_execution"),
        command=texts,
        aggregated_output=texts,
        exit_code=st.integers() | st.none(),
        status=st.sampled_from(["in_progress", "completed", "failed", "declined"]),
    ),
    obj(
        id=ids,
        type=st.just("file_change"),
        changes=st.lists(obj(path=texts, kind=st.sampled_from(["add", "update"])), max_size=2),
        status=st.sampled_from(["completed", "failed"]),
    ),
    obj(
        id=ids,
        type=st.just("mcp_tool_call"),
        server=texts,
        tool=texts,
        arguments=arguments_,
        result=obj(content=text_blocks, structured_content=anything) | st.none(),
        error=obj(message=texts) | st.none(),
        status=st.sampled_from(["completed", "failed"]),
    ),
    obj(id=ids, type=st.sampled_from(["web_search", "todo_list", "error", "plan"])),
)
codex_events = st.one_of(
    obj(type=st.sampled_from(["item.started", "item.updated", "item.completed"]), item=codex_items),
    obj(type=st.sampled_from(["item.completed"]), item=codex_items),
    obj(type=st.just("turn.completed"), usage=usage_like),
    obj(type=st.sampled_from(["thread.started", "turn.started", "turn.failed", "error"])),
    anything,
)
claude_blocks = st.one_of(
    obj(type=st.just("text"), text=texts),
    obj(type=st.just("thinking"), thinking=texts),
    obj(type=st.just("tool_use"), id=ids, name=texts, input=arguments_),
    obj(type=st.just("tool_result"), tool_use_id=ids, content=texts | text_blocks),
    obj(type=st.sampled_from(["image", "redacted_thinking"])),
)
claude_events = st.one_of(
    obj(
        type=st.sampled_from(["assistant", "user"]),
        message=obj(
            id=st.sampled_from(["m1", "m2"]),
            content=st.lists(claude_blocks, max_size=3) | texts,
            usage=usage_like,
        ),
        parent_tool_use_id=st.none(),
    ),
    obj(type=st.just("result"), subtype=st.just("success"), usage=usage_like),
    obj(type=st.just("system"), subtype=st.sampled_from(["init", "compact_boundary"])),
    obj(type=st.sampled_from(["tool_progress", "stream_event"])),
    anything,
)
kimi_parts = st.lists(
    st.one_of(
        obj(type=st.just("text"), text=texts),
        obj(type=st.just("think"), think=texts),
        obj(type=st.just("image_url")),
    ),
    max_size=3,
)
kimi_events = st.one_of(
    obj(
        role=st.just("assistant"),
        content=texts | kimi_parts,
        tool_calls=st.lists(
            obj(id=ids, type=st.just("function"), function=obj(name=texts, arguments=arguments_)),
            max_size=3,
        ),
    ),
    obj(
        role=st.sampled_from(["tool", "user", "system"]),
        tool_call_id=ids,
        content=texts | kimi_parts,
    ),
    obj(role=st.just("meta"), type=texts),
    obj(type=texts),
    anything,
)
SHAPED = {
    "native": messages_.map(msgspec.to_builtins) | json_values,
    "codex": codex_events,
    "claude-code": claude_events,
    "kimi": kimi_events,
    "qoder": claude_events,
}


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(data=st.data())
def test_event_shaped_json_never_raises(provider: str, data: st.DataObject) -> None:
    events = data.draw(st.lists(SHAPED[provider], max_size=10))
    run_lines(provider, [msgspec.json.encode(event) for event in events])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_pathological_lines_never_raise(provider: str) -> None:
    deep_arguments = {"type": "item.completed", "item": {"id": "x", "type": "mcp_tool_call"}}
    nested: Any = 1
    for _ in range(150):
        nested = [nested]
    deep_arguments["item"]["arguments"] = {"deep": nested}  # type: ignore[index]
    lines = [
        b"[" * 100_000,  # deeper than the JSON decoder recurses
        b"{" * 50_000,
        b'{"a":' * 50_000,
        b"\xff\xfe not utf-8",
        b'"\\ud800"',
        b"123456789012345678901234567890",
        msgspec.json.encode(deep_arguments),
        b'{"role": "assistant", "tool_calls": '
        + b'[{"id": "c", "function": {"name": "f", "arguments": "['
        + b"[" * 5000
        + b'"}}]}',
    ]
    run_lines(provider, lines)


def test_unknown_kinds_are_bounded() -> None:
    parser = parser_for("codex")
    for n in range(1000):
        parser.feed(msgspec.json.encode({"type": f"kind-{n}" + "x" * 100}))
    assert len(parser.unknown) <= 65
    assert sum(parser.unknown.values()) == 1000
    assert all(len(kind) <= 64 for kind in parser.unknown)


# --------------------------------------------------------------------------- arguments


def test_arguments_are_always_a_dict() -> None:
    parser = parser_for("kimi")

    def arguments(value: Any) -> dict[str, Any]:
        line = {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": value}}],
        }
        (message,) = parser.feed(msgspec.json.encode(line))
        return message.tool_calls[0].arguments

    assert arguments('{"path": "a.py"}') == {"path": "a.py"}
    assert arguments({"path": "a.py"}) == {"path": "a.py"}
    assert arguments("[1, 2]") == {"value": [1, 2]}
    assert arguments("not json") == {"value": "not json"}
    assert arguments("") == {}
    assert arguments(None) == {}
    assert arguments(7) == {"value": 7}
    deep: Any = "bottom"
    for _ in range(100):
        deep = {"d": deep}
    level: Any = arguments(deep)
    for _ in range(32):  # kept as values down to 32 levels, then as JSON text
        level = level["d"]
    rest: Any = "bottom"
    for _ in range(68):
        rest = {"d": rest}
    assert isinstance(level, str) and msgspec.json.decode(level) == rest


def test_missing_call_ids_are_deterministic() -> None:
    def ids() -> list[str]:
        parser = parser_for("claude-code")
        line = {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {}}]},
        }
        out = parser.feed(msgspec.json.encode(line)) + parser.feed(msgspec.json.encode(line))
        return [c.id for m in out + parser.close() for c in m.tool_calls]

    assert ids() == ids() == ["claude-call-1", "claude-call-2"]


# --------------------------------------------------------------------------- codex details


def feed_all(provider: str, events: list[dict[str, Any]]) -> tuple[list[Message], dict[str, int]]:
    parser = parser_for(provider)
    out: list[Message] = []
    for event in events:
        out += parser.feed(msgspec.json.encode(event))
    out += parser.close()
    return out, parser.unknown


def completed(**item: Any) -> dict[str, Any]:
    return {"type": "item.completed", "item": item}


def test_codex_reasoning_without_a_following_message_stands_alone_with_the_usage() -> None:
    usage = {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 3}
    out, unknown = feed_all(
        "codex",
        [
            {"type": "turn.started"},
            completed(id="r", type="reasoning", text="**Thinking**"),
            {"type": "turn.completed", "usage": usage},
        ],
    )
    assert out == [
        Message(
            role="assistant",
            reasoning="**Thinking**",
            usage=Usage(input_tokens=10, output_tokens=3, cached_tokens=4),
        )
    ]
    assert unknown == {}


def test_codex_turn_without_messages_gets_a_trailing_usage_message() -> None:
    out, _ = feed_all(
        "codex",
        [{"type": "turn.started"}, {"type": "turn.completed", "usage": {"input_tokens": 5}}],
    )
    assert out == [Message(role="assistant", usage=Usage(input_tokens=5))]


def test_codex_text_is_released_when_a_command_starts() -> None:
    parser = parser_for("codex")
    assert (
        parser.feed(msgspec.json.encode(completed(id="m", type="agent_message", text="Next:")))
        == []
    )
    started = {
        "type": "item.started",
        "item": {"id": "c", "type": "command_execution", "command": "ls"},
    }
    assert parser.feed(msgspec.json.encode(started)) == [Message(role="assistant", content="Next:")]


def test_codex_mcp_tool_calls_and_failures() -> None:
    out, _ = feed_all(
        "codex",
        [
            completed(
                id="m1",
                type="mcp_tool_call",
                server="docs",
                tool="search",
                arguments={"q": "cartpole"},
                result={"content": [{"type": "text", "text": "found"}], "structured_content": None},
                status="completed",
            ),
            completed(
                id="m2",
                type="mcp_tool_call",
                server="docs",
                tool="fetch",
                arguments='{"url": "x"}',
                result=None,
                error={"message": "timeout"},
                status="failed",
            ),
            completed(
                id="m3",
                type="mcp_tool_call",
                server="docs",
                tool="stats",
                result={"content": [], "structured_content": {"n": 1}},
                status="completed",
            ),
            completed(
                id="c",
                type="command_execution",
                command="rm -rf /",
                aggregated_output="",
                exit_code=None,
                status="declined",
            ),
        ],
    )
    assert out == [
        call("m1", "mcp__docs__search", {"q": "cartpole"}),
        result("m1", "mcp__docs__search", "found"),
        call("m2", "mcp__docs__fetch", {"url": "x"}),
        result("m2", "mcp__docs__fetch", "error: timeout"),
        call("m3", "mcp__docs__stats", {}),
        result("m3", "mcp__docs__stats", '{"n":1}'),
        call("c", "shell", {"command": "rm -rf /"}),
        result("c", "shell", "[declined]"),
    ]


def test_codex_unfinished_commands_are_emitted_at_eof() -> None:
    out, unknown = feed_all(
        "codex",
        [
            {"type": "turn.started"},
            completed(id="r", type="reasoning", text="**Run it**"),
            {
                "type": "item.started",
                "item": {"id": "c", "type": "command_execution", "command": "sleep 100"},
            },
        ],
    )
    assert out == [with_(call("c", "shell", {"command": "sleep 100"}), reasoning="**Run it**")]
    assert unknown == {}


def test_codex_errors_are_error_records_and_the_rest_is_counted() -> None:
    body = '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}'
    out, unknown = feed_all(
        "codex",
        [
            {"type": "error", "message": "Reconnecting... 1/5"},
            completed(id="w", type="web_search", query="cartpole pd gains"),
            completed(id="m", type="agent_message", text="partial"),
            {"type": "turn.failed", "error": {"message": "stream disconnected"}},
            {"type": "item.completed"},
            {"item": {}},
            completed(id="e", type="error", message="Model metadata for `x` not found."),
            {"type": "error", "message": "unexpected status 401 Unauthorized: " + body},
            {
                "type": "turn.failed",
                "error": {"message": "unexpected status 401 Unauthorized: " + body},
            },
        ],
    )
    assert out == [
        Message(role="error", content="Reconnecting... 1/5", error=AgentFault(kind="error")),
        Message(role="assistant", content="partial"),
        Message(role="error", content="stream disconnected", error=AgentFault(kind="turn_failed")),
        Message(
            role="error",
            content="Model metadata for `x` not found.",
            error=AgentFault(kind="cli_error"),
        ),
        # said twice by codex (error, then turn.failed), recorded once, its status read off
        Message(
            role="error",
            content="unexpected status 401 Unauthorized: " + body,
            error=AgentFault(kind="error", status=401),
        ),
    ]
    assert unknown == {"item:web_search": 1, "malformed": 2}


def test_claude_synthetic_messages_are_error_records_with_the_results_status() -> None:
    synthetic = {
        "type": "assistant",
        "error": "authentication_failed",
        "message": {
            "id": "x",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [{"type": "text", "text": "Not logged in · Please run /login"}],
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    }
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 401,
        "result": "Not logged in",
    }
    out, unknown = feed_all("claude-code", [synthetic, result])
    assert out == [
        Message(
            role="error",
            content="Not logged in · Please run /login",
            error=AgentFault(kind="authentication_failed", status=401),
        )
    ]
    # a failing result with nothing before it is its own record
    out, _ = feed_all(
        "qoder",
        [
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "result": "boom",
            }
        ],
    )
    assert out == [
        Message(role="error", content="boom", error=AgentFault(kind="error_during_execution"))
    ]
    assert unknown == {}


# --------------------------------------------------------------------------- claude details


def test_claude_result_usage_without_a_pending_message_is_a_trailing_message() -> None:
    out, _ = feed_all(
        "claude-code",
        [
            {
                "type": "assistant",
                "message": {
                    "id": "m",
                    "content": [
                        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}
                    ],
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": "a",
                            "is_error": False,
                        }
                    ]
                },
            },
            {
                "type": "result",
                "subtype": "error_max_turns",
                "usage": {"input_tokens": 5, "output_tokens": 9},
            },
        ],
    )
    assert out == [
        with_(call("t", "Bash", {"command": "ls"}), usage=Usage(input_tokens=5, output_tokens=1)),
        result("t", "Bash", "a"),
        Message(role="assistant", usage=Usage(output_tokens=8)),
    ]


def test_claude_subagents_images_and_other_system_messages_are_counted() -> None:
    out, unknown = feed_all(
        "claude-code",
        [
            {"type": "system", "subtype": "init", "session_id": "s"},
            {"type": "system", "subtype": "compact_boundary"},
            {
                "type": "assistant",
                "parent_tool_use_id": "task",
                "message": {"id": "x", "content": [{"type": "text", "text": "sub"}]},
            },
            {"type": "user", "parent_tool_use_id": "task", "message": {"content": "sub prompt"}},
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": [
                                {"type": "text", "text": "shot"},
                                {"type": "image", "source": {}},
                            ],
                        },
                        {"type": "text", "text": "[Request interrupted by user]"},
                    ]
                },
            },
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "redacted_thinking", "data": "..."},
                        {"type": "text", "text": "ok"},
                    ]
                },
            },
        ],
    )
    assert out == [
        result("t", None, "shot"),
        Message(role="user", content="[Request interrupted by user]"),
        Message(role="assistant", content="ok"),
    ]
    assert unknown == {
        "system:compact_boundary": 1,
        "subagent": 2,
        "content:image": 1,
        "content:redacted_thinking": 1,
    }
