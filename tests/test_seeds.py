"""derive_seed: deterministic, 63-bit, domain-separated and unambiguous."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.seeds import derive_seed, seed_deriver

# Pinned values: a Run is reproducible only while these never change.
KNOWN = [
    (("policy", 7, "x"), 4299605342840210713),
    (("episode", 0), 571477078136769024),
    (("run",), 1337589112376904816),
]


@pytest.mark.parametrize(("args", "expected"), KNOWN)
def test_known_answers(args, expected):
    assert derive_seed(*args) == expected


def test_deterministic_and_int():
    a = derive_seed("episode", 12345, "cartpole", -3)
    b = derive_seed("episode", 12345, "cartpole", -3)
    assert a == b
    assert type(a) is int


@given(
    st.text(max_size=10),
    st.lists(st.one_of(st.integers(), st.text(max_size=10)), max_size=5),
)
@settings(max_examples=300)
def test_range_is_63_bits(domain, parts):
    seed = derive_seed(domain, *parts)
    assert 0 <= seed < 2**63
    assert seed == derive_seed(domain, *parts)


def test_domain_separation():
    for parts in [(), (1,), ("x",), (0, "a", 99)]:
        seeds = {derive_seed(d, *parts) for d in ("policy", "episode", "pool", "", "policy ")}
        assert len(seeds) == 5


def test_concatenation_is_unambiguous():
    assert derive_seed("d", "a", 1) != derive_seed("d", "a1")
    assert derive_seed("d", "ab", "c") != derive_seed("d", "a", "bc")
    assert derive_seed("d", "", "a") != derive_seed("d", "a", "")
    assert derive_seed("d", "a") != derive_seed("d", "a", "")
    assert derive_seed("d", 12) != derive_seed("d", 1, 2)
    # the domain is one more length-prefixed part, not glued to the first part
    assert derive_seed("ab", "c") != derive_seed("a", "bc")
    assert derive_seed("ab") != derive_seed("a", "b")


def test_int_and_str_parts_differ():
    assert derive_seed("d", 1) != derive_seed("d", "1")
    assert derive_seed("d", -1) != derive_seed("d", "-1")
    assert derive_seed("d", 1) != derive_seed("d", -1)
    assert derive_seed("d", 0) != derive_seed("d", "0")


@pytest.mark.parametrize("bad", [True, False, 1.0, None, b"a", (1,), [1]])
def test_bad_parts_rejected(bad):
    with pytest.raises(TypeError):
        derive_seed("d", bad)
    with pytest.raises(TypeError):
        derive_seed("d", 1, "x", bad)


@pytest.mark.parametrize("bad", [True, None, 1.5, b"policy"])
def test_bad_domain_rejected(bad):
    with pytest.raises(TypeError):
        derive_seed(bad, 1)


# Small alphabets make near-collisions (concatenation ambiguities, int/str lookalikes) likely.
_part = st.one_of(st.integers(-20, 120), st.text(alphabet="a1-", max_size=3))
_key = st.tuples(
    st.sampled_from(["policy", "episode", "pool", "a", "a1", ""]),
    st.lists(_part, max_size=3).map(tuple),
)


def _canonical(key):
    domain, parts = key
    return (domain, tuple((type(p).__name__, p) for p in parts))


@given(st.lists(_key, min_size=2, max_size=60, unique_by=_canonical))
@settings(max_examples=200)
def test_distinct_inputs_give_distinct_seeds(keys):
    seeds = [derive_seed(domain, *parts) for domain, parts in keys]
    assert len(set(seeds)) == len(seeds)


@given(
    st.text(max_size=10),
    st.lists(st.one_of(st.integers(), st.text(max_size=10)), max_size=4),
    st.lists(st.one_of(st.integers(), st.text(max_size=10)), min_size=1, max_size=5),
)
@settings(max_examples=200)
def test_a_deriver_gives_derive_seed_of_the_last_part(domain, parts, lasts):
    """Plans derive a million seeds that differ only in the Episode index: the prefix is
    hashed once, and every seed is the one derive_seed gives."""
    derive = seed_deriver(domain, *parts)
    assert [derive(last) for last in lasts] == [derive_seed(domain, *parts, last) for last in lasts]


def test_a_deriver_checks_its_parts():
    with pytest.raises(TypeError):
        seed_deriver("d", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        seed_deriver("d", 1)(True)
