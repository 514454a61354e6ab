"""Object meta records without a server: tolerant ADR-20 decoding and the TTL a rewrite keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jetstream
import objstore
from jetstream._protocol.message import ns_of_time
from objstore._meta import attempts, remaining_ttl
from objstore._models import decode_info, meta_subject, name_from_meta_subject
from objstore._trust import info_from_message

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _stored(headers: dict[str, str], age: float) -> jetstream.StoredMessage:
    return jetstream.StoredMessage(
        subject="$O.s.M.eA==",
        seq=1,
        time_ns=ns_of_time(NOW - timedelta(seconds=age)),
        headers=headers,
        data=b"",
    )


@pytest.mark.parametrize(
    ("headers", "age", "kept"),
    [
        ({}, 100.0, {}),  # no TTL: none kept
        ({"Nats-TTL": "10"}, 3.5, {"Nats-TTL": "6"}),  # rounded down: never outlives chunks
        ({"Nats-TTL": "1m"}, 0.0, {"Nats-TTL": "60"}),  # a peer's Go duration
        ({"Nats-TTL": "never"}, 99.0, {"Nats-TTL": "never"}),
        ({"Nats-TTL": "10"}, -2.0, {"Nats-TTL": "10"}),  # a clock behind the server's
        ({"Nats-TTL": "10"}, 9.2, None),  # under a second left: expiring
        ({"Nats-TTL": "10"}, 30.0, None),
        ({"Nats-TTL": "bogus"}, 1.0, {}),
    ],
)
def test_a_rewrite_keeps_the_ttl_left(
    headers: dict[str, str], age: float, kept: dict[str, str] | None
) -> None:
    assert remaining_ttl(_stored(headers, age), now=NOW) == kept


def test_omitted_and_null_fields_take_their_defaults() -> None:
    info = decode_info(
        b'{"name":"l","bucket":"b","options":{"link":{"bucket":"b","name":"t"}}}',
        name="ignored",
        bucket="b",
    )
    assert (info.name, info.nuid, info.size, info.chunks, info.mtime, info.digest) == (
        "l", "", 0, 0, None, ""
    )  # fmt: skip
    assert info.link == objstore.ObjectLink(bucket="b", name="t")
    nulls = decode_info(b'{"nuid":"n","size":3,"chunks":1,"mtime":null,"options":null}', name="x")
    assert (nulls.name, nulls.size, nulls.mtime, nulls.options) == ("x", 3, None, None)
    store_link = decode_info(b'{"name":"s","options":{"link":{"bucket":"o"}}}')
    assert store_link.link == objstore.ObjectLink(bucket="o")
    unknown = decode_info(b'{"name":"u","revision":7,"future":{"x":1}}')
    assert unknown.name == "u"


@pytest.mark.parametrize("data", [b"not json", b"[1,2]", b'"s"', b'{"size":"big"}', b"{"])
def test_unreadable_records_are_a_typed_error(data: bytes) -> None:
    with pytest.raises(objstore.InvalidObjectMetaError) as raised:
        decode_info(data, name="x")
    assert isinstance(raised.value, jetstream.JetStreamError)


def test_an_empty_record_is_a_deleted_object() -> None:
    subject = meta_subject("s", "gone")
    marker = info_from_message("s", subject, b"", {"Nats-Marker-Reason": "MaxAge"})
    assert (marker.name, marker.deleted, marker.expired) == ("gone", True, True)
    purged = info_from_message("s", subject, b"", {})
    assert purged.deleted and not purged.expired


def test_meta_subjects_that_are_not_base64_still_name_something() -> None:
    assert name_from_meta_subject(meta_subject("s", "a/b c")) == "a/b c"
    assert name_from_meta_subject("$O.s.M.!!!") == "!!!"
    assert name_from_meta_subject("$O.s.M.YQ") == "a", "unpadded"
    assert name_from_meta_subject("$O.s.M._w==") == "_w==", "not UTF-8"


def test_rewrites_give_up_after_a_bounded_number_of_conflicts() -> None:
    tries = attempts("update of 'x'")
    assert [next(tries) for _ in range(16)] == list(range(16))
    with pytest.raises(objstore.ObjectChangedError, match="16 attempts; nothing written"):
        next(tries)
