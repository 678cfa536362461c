"""The redactor remembers what it made of each string: the memo must change no result.

``Redactor.text`` keeps its result for the strings it has seen (dict keys, roles,
program files recur across the rows of an export), and ``value`` what each dict key
names. With the memo switched off every string takes the full scan, as it did before
there was one, and the walk over dicts and lists as it was then is kept here; these
properties compare the two on generated strings with secrets (literal and by shape)
planted at random places, and on nested dicts and lists of them, through a redactor that
has already seen earlier examples (so its answers come from the memo) and one whose memo
is tiny (so it keeps starting over).
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym import redaction
from evopolicygym.agents.message_redaction import Redactor as AgentsRedactor
from evopolicygym.redaction import REDACTED, Redactor

LITERALS = ("hunter2-very-secret", "Zq8#lit3ral/seed+Value", "canary-5b1f0e")
# Secrets by shape, and pieces that are near misses of one.
PLANTED = [
    "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "Authorization: Bearer tok3nVal-ue.99xyz",
    "bearer 9f8e7d6c5b4a3f2e1d0c",
    '{"authorization": "Token r4nd0mT0kenValue"}',
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2" * 9,
    "github_pat_" + "A1b2_" * 5,
    "glpat-" + "x9" * 10,
    "hf_" + "Q7w" * 11,
    "AIza" + "B3c_" * 9,
    "xoxb-1234567890-abcdef",
    "eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9yX2w\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nMIIEowIB",
    "postgres://user:pa55word99@db:5432/x",
    'api_key = "s3cr3tV4lue!"',
    "OPENAI_API_KEY=abc123def456ghi",
    "--token 'Tk9x8c7v6b5n4m'",
    "password: correct-horse-battery",
    "Basic dXNlcjpodW50ZXIy",  # as the value of an Authorization key
    "Token abcdefgh",
    "abcdefgh12345678",
    "correct-horse-battery",
    '"pad_token": "<pad>"',
    "max_tokens=4096",
    "tokenizer",
    "sk-short",
    REDACTED,
    "[REDACTE",
    *LITERALS,
    "aHVudGVyMi12ZXJ5LXNlY3JldA",  # a literal base64-encoded
    "hunter2-very-secret".replace("-", "%2D"),
]
KEYS = [
    "api_key",
    "Authorization",
    "proxy-authorization",
    "password",
    "content",
    "role",
    "input_tokens",
    "bos_token",
    "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "hunter2-very-secret",
]

pieces = st.one_of(
    st.sampled_from(PLANTED),
    st.text(alphabet=string.printable, max_size=12),
    st.sampled_from([" ", "\n", "=", ": ", '"', "'", "_", "-", "@", "://", "Bearer ", "token="]),
)
texts = st.lists(pieces, max_size=12).map("".join)
keys = st.one_of(st.sampled_from(KEYS), texts)
values = st.recursive(
    st.one_of(
        texts,
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        texts.map(str.encode),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=25,
)

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Shared across examples, so later examples are answered from what earlier ones left.
WARM = Redactor(LITERALS)
WARM_SHAPES = AgentsRedactor()


@contextmanager
def memo(longest: int | None = None, chars: int | None = None) -> Iterator[None]:
    saved = redaction._MEMO_LONGEST, redaction._MEMO_CHARS
    try:
        if longest is not None:
            redaction._MEMO_LONGEST = longest
        if chars is not None:
            redaction._MEMO_CHARS = chars
        yield
    finally:
        redaction._MEMO_LONGEST, redaction._MEMO_CHARS = saved


def unmemoized(redactor: Redactor, v: Any) -> Any:
    """What ``redactor.value(v)`` was before the memo: every string scanned in full, by
    the walk as it was then (kept here verbatim), each dict key matched afresh."""
    with memo(longest=-1):
        return _reference_value(redactor, v)


def _reference_value(r: Redactor, v: Any) -> Any:
    if isinstance(v, str):
        return r.text(v)
    if isinstance(v, dict):
        pairs = [
            (_reference_key(r, k), k, _reference_entry(r, k, item), item) for k, item in v.items()
        ]
        if all(new_key is k and new is item for new_key, k, new, item in pairs):
            return v
        return {new_key: new for new_key, _, new, _ in pairs}
    if isinstance(v, list | tuple):
        items = [_reference_value(r, item) for item in v]
        if all(new is old for new, old in zip(items, v, strict=True)):
            return v
        return items if isinstance(v, list) else tuple(items)
    if isinstance(v, bytes):
        return r.bytes(v)
    return v


def _reference_key(r: Redactor, key: Any) -> Any:
    return r.text(key) if isinstance(key, str) else key


def _reference_entry(r: Redactor, key: Any, item: Any) -> Any:
    if isinstance(key, str) and isinstance(item, str):
        if (
            redaction._KEY_NAME.fullmatch(key)
            and redaction._QUOTED_VALUE.fullmatch(item)
            and not redaction._NAME_LIKE.fullmatch(item)
        ):
            return REDACTED
        if redaction._AUTHORIZATION_KEY.fullmatch(key):
            match = redaction._SCHEME_VALUE.fullmatch(item)
            if match:
                return (match.group(1) or "") + REDACTED
    return _reference_value(r, item)


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down (a tuple stays a tuple)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def check(redactor: Redactor, v: Any) -> None:
    expected = unmemoized(redactor, v)
    for _ in range(2):  # the second time from the memo
        got = redactor.value(v)
        assert same(got, expected)
        assert (got is v) == (expected is v)  # "nothing replaced" is told by identity
    if repr(redactor) != "Redactor(0 secrets)":  # a redactor given the literals
        for secret in LITERALS:
            assert secret not in repr(got)


@PROPERTY
@given(text=texts)
def test_text_is_the_same_with_the_memo(text: str) -> None:
    for redactor in (WARM, WARM_SHAPES):
        with memo(longest=-1):
            expected = redactor.text(text)
        got = redactor.text(text)
        assert got == expected
        assert (got is text) == (expected is text)
        assert redactor.text(text) == expected
        assert redactor.bytes(text.encode()) == expected.encode()


@PROPERTY
@given(v=values)
def test_values_are_redacted_the_same_with_the_memo(v: Any) -> None:
    check(WARM, v)
    check(WARM_SHAPES, v)


@PROPERTY
@given(v=values)
def test_a_memo_that_keeps_starting_over_changes_nothing(v: Any) -> None:
    redactor = Redactor(LITERALS)
    with memo(chars=64):
        check(redactor, v)
        check(redactor, v)


def test_a_string_too_long_for_the_memo_is_redacted_in_full() -> None:
    secret = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    long = "x " * redaction._MEMO_LONGEST + secret
    redactor = Redactor()
    for _ in range(2):
        out = redactor.text(long)
        assert secret not in out and out.endswith(REDACTED)
    assert long not in redactor._memo


def test_a_str_subclass_is_redacted_but_not_remembered() -> None:
    class Text(str):
        pass

    redactor = Redactor(LITERALS)
    s = Text("say hunter2-very-secret")
    assert redactor.text(s) == "say " + REDACTED
    assert redactor._memo == {}
    plain = Text("nothing here")
    assert redactor.text(plain) is plain
