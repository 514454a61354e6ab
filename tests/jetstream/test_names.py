"""Stream/consumer names and header names: the server's rules, checked without a server."""

from __future__ import annotations

import pytest

import jetstream
from jetstream._protocol.names import MAX_NAME_BYTES, validate_name, validate_subject_token
from jetstream._protocol.subjects import ApiSubjects
from jetstream.headers import validate_headers

GOOD = ["S", "KV_profiles", "OBJ_a-b", "ünïcode", "x" * MAX_NAME_BYTES, "a:b", "a$b"]
BAD = [
    "",
    ".",
    "a.b",
    "*",
    ">",
    "a>",
    "a b",
    "a\tb",
    "a\nb",
    "a\rb",
    "a\fb",
    "a\x00b",
    "a\x7fb",
    "a/b",
    "a\\b",
    "x" * (MAX_NAME_BYTES + 1),
    "é" * 128,
]


@pytest.mark.parametrize("name", GOOD)
def test_names_the_server_accepts_pass(name: str) -> None:
    assert validate_name(name) == name
    assert ApiSubjects().stream_info(name) == f"$JS.API.STREAM.INFO.{name}"


@pytest.mark.parametrize("name", BAD, ids=repr)
def test_names_the_server_refuses_raise_a_typed_value_error(name: str) -> None:
    api = ApiSubjects()
    for build in (
        lambda: api.stream_info(name),
        lambda: api.stream_create(name),
        lambda: api.direct_get(name),
        lambda: api.consumer_delete("S", name),
        lambda: api.consumer_create("S", name),
        lambda: api.consumer_next(name, "c"),
    ):
        with pytest.raises(jetstream.InvalidNameError) as refused:
            build()
        assert isinstance(refused.value, ValueError)
        assert isinstance(refused.value, jetstream.JetStreamError)


@pytest.mark.parametrize("name", [None, 3, b"S", ["S"]], ids=repr)
def test_non_strings_are_refused(name: object) -> None:
    with pytest.raises(jetstream.InvalidNameError):
        validate_name(name)  # type: ignore[arg-type]


def test_bucket_name_errors_are_name_errors() -> None:
    assert issubclass(jetstream.InvalidBucketNameError, jetstream.InvalidNameError)


@pytest.mark.parametrize("subject", ["", ".a", "a.", "a..b", "a b", "a\r\nPUB x", "a\x00"])
def test_direct_get_subjects_must_be_whole_tokens(subject: str) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        ApiSubjects().direct_get("S", subject)
    assert validate_subject_token("$KV.b.>") == "$KV.b.>"


@pytest.mark.parametrize(
    "headers",
    [
        {"": "v"},
        {" ": "v"},
        {"a b": "v"},
        {"a:b": "v"},
        {"a\x00": "v"},
        {"a\x7f": "v"},
        {"a\r\nB": "v"},
        {"a": "v\r\nB: w"},
        {"a": "v\n"},
    ],
    ids=repr,
)
def test_bad_headers_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(jetstream.InvalidHeaderError):
        validate_headers(headers)


def test_good_headers_pass() -> None:
    validate_headers({"Nats-TTL": "1s", "X-Custom_1.2": "any value: with colon"})
