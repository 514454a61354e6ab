"""Key, filter and bucket-name rules, as nats.go's kv.go enforces them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvstore import (
    InvalidBucketNameError,
    InvalidKeyError,
    validate_bucket_name,
    validate_filter,
    validate_key,
)
from kvstore._keys import distinct_filters

_NATS_KV_KEY = re.compile(r"^[-/_=\.a-zA-Z0-9]+$")


@pytest.mark.parametrize("key", ["a", "alice.name", "a-b_c/d=e", "A.B.C", "0", "x" * 1000])
def test_valid_keys(key: str) -> None:
    validate_key(key)


@pytest.mark.parametrize(
    "key",
    ["", ".a", "a.", "a..b", "a b", "a*", "a.>", "*", ">", "a\tb", "é", "a\r\nb", "$KV", 7, None],
)
def test_invalid_keys(key: object) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(key)  # type: ignore[arg-type]


@given(st.text(max_size=20))
def test_key_rule_matches_nats(key: str) -> None:
    valid = bool(_NATS_KV_KEY.match(key)) and not (
        key.startswith(".") or key.endswith(".") or ".." in key or key.endswith("\n")
    )
    if valid:
        validate_key(key)
    else:
        with pytest.raises(InvalidKeyError):
            validate_key(key)


@pytest.mark.parametrize("pattern", [">", "*", "a.*", "a.>", "a.*.c", "*.b.>", "alice.name"])
def test_valid_filters(pattern: str) -> None:
    validate_filter(pattern)


@pytest.mark.parametrize("pattern", ["", "a.>.c", "a*", "a.b*", ".a", "a.", "a..b", "a b"])
def test_invalid_filters(pattern: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_filter(pattern)


@pytest.mark.parametrize("name", ["profiles", "A-b_1", "x" * 252])
def test_valid_bucket_names(name: str) -> None:
    validate_bucket_name(name)


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a*", "a>", "é", "x" * 253, None])
def test_invalid_bucket_names(name: object) -> None:
    with pytest.raises(InvalidBucketNameError):
        validate_bucket_name(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("patterns", "kept"),
    [
        (["a.>", "a.b"], ["a.>"]),
        (["a.b", "a.>"], ["a.>"]),
        (["a.>", "a.>"], ["a.>"]),
        ([">", "a.*", "b"], [">"]),
        (["a.*", "a.b", "a.b.c"], ["a.*", "a.b.c"]),  # a.* covers a.b, not a.b.c
        (["a.*.c", "a.b.c"], ["a.*.c"]),
        (["a", "a.>"], ["a", "a.>"]),  # a.> needs a token after a
        (["a.b", "a.c", "b.>"], ["a.b", "a.c", "b.>"]),
        (["a.*", "a.>"], ["a.>"]),
    ],
)
def test_covered_and_repeated_filters_are_dropped(patterns: list[str], kept: list[str]) -> None:
    assert distinct_filters(patterns) == kept


@pytest.mark.parametrize("patterns", [["a.*.c", "a.b.>"], ["*.b", "a.*"], ["a.*.>", "*.b.c"]])
def test_filters_that_only_partly_overlap_are_refused(patterns: list[str]) -> None:
    with pytest.raises(InvalidKeyError, match="overlap"):
        distinct_filters(patterns)
