"""The selector syntax of ``submit --episodes`` (DESIGN §4.2): half-open ranges, strictly
increasing, no overlap; every rendering parses back, and junk is refused.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evopolicygym.protocol import SelectorError, format_selector, parse_selector
from tests.support.decider import render

increasing_indices = st.lists(
    st.integers(min_value=0, max_value=10**6), min_size=1, max_size=40, unique=True
).map(sorted)


def runs_of(indices: list[int]) -> int:
    return 1 + sum(1 for a, b in itertools.pairwise(indices) if b != a + 1)


@given(increasing_indices)
def test_selector_round_trip(indices: list[int]) -> None:
    text = format_selector(indices)
    assert parse_selector(text) == indices
    assert text.count(",") + 1 == runs_of(indices)  # the shortest form: one part per run


@st.composite
def rendered_selectors(draw: st.DrawFn) -> tuple[str, list[int]]:
    indices = draw(increasing_indices)
    return render(draw, indices), indices


@given(rendered_selectors())
def test_every_rendering_parses_to_its_indices(case: tuple[str, list[int]]) -> None:
    text, indices = case
    assert parse_selector(text) == indices


@given(increasing_indices, st.data())
def test_overlapping_or_decreasing_parts_are_refused(
    indices: list[int], data: st.DataObject
) -> None:
    again = data.draw(st.integers(min_value=0, max_value=indices[-1]), label="not after the end")
    text = f"{format_selector(indices)},{again}"
    with pytest.raises(SelectorError, match="strictly increasing"):
        parse_selector(text)
    stop = data.draw(st.integers(min_value=again + 1, max_value=again + 5))
    with pytest.raises(SelectorError, match="strictly increasing"):
        parse_selector(f"{format_selector(indices)},{again}:{stop}")


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_empty_ranges_are_refused(start: int, shorter: int) -> None:
    stop = min(start, shorter)
    with pytest.raises(SelectorError, match="empty range"):
        parse_selector(f"{start}:{stop}")


GRAMMAR_CHARS = set("0123456789:,") | {chr(c) for c in range(128) if chr(c).isspace()}


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=30))
def test_ascii_junk_is_refused(text: str) -> None:
    if set(text) <= GRAMMAR_CHARS:
        return  # may be a selector; covered above
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(
    "text", ["", " ", ",", "1,", ",1", "1:", ":", "1::2", "1:2:3", "1 2", "1234567890", "+1", "1.0"]
)
def test_grammar_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_selector_size_limits() -> None:
    with pytest.raises(SelectorError, match="longer than"):
        parse_selector("1" * 1001)
    with pytest.raises(SelectorError, match="1,000,000"):
        parse_selector("0:1000001")
    assert len(parse_selector("0:1000000")) == 1_000_000
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize("text", ["\uff13", "\u0663:\u0665", "\u0663", "1:\uff15"])
def test_non_ascii_digits_are_refused(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)
