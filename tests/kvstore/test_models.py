"""Wire models and their mapping to KV buckets: pure logic, no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import jetstream
import kvstore
import objstore
from jetstream._protocol.duration import decode_hook, encode_hook
from jetstream._protocol.message import parse_ack_reply, parse_timestamp
from kvstore import BucketConfig, InvalidBucketConfigError, Op
from kvstore._models import bucket_config_from_stream, op_from_headers, stream_config_for_bucket


def test_stream_config_sends_only_non_defaults() -> None:
    encoded = msgspec.json.decode(_wire(jetstream.StreamConfig(name="S")))
    assert encoded == {"name": "S"}


def _wire(model: object) -> bytes:
    return msgspec.json.encode(model, enc_hook=encode_hook)


def _from_wire(raw: bytes, kind: type[object]) -> object:
    return msgspec.json.decode(raw, type=kind, dec_hook=decode_hook)


@pytest.mark.parametrize("given", [30, 30.0, timedelta(seconds=30), "30s", "0.5m", "30000ms"])
def test_consumer_durations_are_seconds_timedeltas_or_strings_never_raw_nanoseconds(
    given: object,
) -> None:
    config = jetstream.ConsumerConfig(
        ack_wait=given, inactive_threshold=given, backoff=[given, "1m"]
    )  # type: ignore[arg-type, list-item]
    assert config.ack_wait == timedelta(seconds=30)
    wire = msgspec.json.decode(_wire(config))
    assert wire["ack_wait"] == wire["inactive_threshold"] == 30_000_000_000
    assert wire["backoff"] == [30_000_000_000, 60_000_000_000]


def test_durations_from_the_server_read_as_timedeltas_and_zero_as_unset() -> None:
    raw = b'{"config":{"name":"S","max_age":3600000000000,"duplicate_window":0},"state":{}}'
    info = _from_wire(raw, jetstream.StreamInfo)
    assert info.config.max_age == timedelta(hours=1)  # type: ignore[attr-defined]
    assert info.config.duplicate_window is None  # type: ignore[attr-defined]
    assert msgspec.json.decode(_wire(info.config.max_age)) == 3_600_000_000_000  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [-1, "soon", "1y", True, float("nan"), [1]])
def test_bad_durations_are_refused_by_name(bad: object) -> None:
    with pytest.raises(jetstream.ClientValidationError, match="ack_wait"):
        jetstream.ConsumerConfig(ack_wait=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("config_type", [BucketConfig, objstore.StoreConfig])
def test_bucket_and_store_durations_take_seconds_and_strings(config_type: type[object]) -> None:
    config = config_type(max_age="30d", marker_ttl=90)  # type: ignore[call-arg]
    assert config.max_age == timedelta(days=30)  # type: ignore[attr-defined]
    assert config.marker_ttl == timedelta(seconds=90)  # type: ignore[attr-defined]
    with pytest.raises(InvalidBucketConfigError, match="max_age"):
        config_type(max_age="forever")  # type: ignore[call-arg]


def test_unknown_response_fields_are_ignored() -> None:
    raw = b'{"config":{"name":"S","brand_new":1},"state":{"messages":3},"future":true}'
    info = msgspec.json.decode(raw, type=jetstream.StreamInfo)
    assert info.config.name == "S" and info.state.messages == 3


def test_bucket_stream_has_the_nats_kv_shape_plus_ttl_and_atomic() -> None:
    config = BucketConfig(history=5, max_age=timedelta(minutes=1), marker_ttl=timedelta(seconds=30))
    stream = stream_config_for_bucket("profiles", config, allow_atomic=True)
    wire = msgspec.json.decode(_wire(stream))
    assert wire == {
        "name": "KV_profiles",
        "subjects": ["$KV.profiles.>"],
        "max_msgs_per_subject": 5,
        "max_age": 60_000_000_000,
        "discard": "new",
        "duplicate_window": 60_000_000_000,  # never longer than max_age
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "allow_msg_ttl": True,
        "subject_delete_marker_ttl": 30_000_000_000,
        "allow_atomic": True,
        "metadata": {"jetstore.key_name_format": "v2"},  # how EncryptedKeyCodec seals names
    }


def test_bucket_config_round_trips_through_the_stream() -> None:
    config = BucketConfig(
        history=7,
        max_age=timedelta(hours=1),
        marker_ttl=timedelta(seconds=5),
        max_value_size=1024,
        max_bytes=1 << 20,
        storage="memory",
        compression=True,
        description="d",
        metadata={"team": "x"},
    )
    stream = stream_config_for_bucket("b", config, allow_atomic=False)
    stream.metadata = {**(stream.metadata or {}), "_nats.level": "5"}  # added by the server
    assert bucket_config_from_stream(stream) == config


@pytest.mark.parametrize(
    "options",
    [
        {"history": 0},
        {"history": 65},
        {"history": True},
        {"max_age": timedelta(seconds=-1)},
        {"max_age": "60 minutes"},
        {"max_age": 0},
        {"marker_ttl": timedelta(milliseconds=500)},
        {"marker_ttl": timedelta(seconds=1.5)},
        {"max_value_size": 0},
        {"max_bytes": -2},
        {"storage": "disk"},
        {"replicas": 0},
        {"replicas": 6},
        {"metadata": {"_nats.level": "1"}},
    ],
)
def test_bad_bucket_configs_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(InvalidBucketConfigError):
        BucketConfig(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "op"),
    [
        (None, Op.PUT),
        ({}, Op.PUT),
        ({"Nats-TTL": "5"}, Op.PUT),
        ({"KV-Operation": "DEL"}, Op.DELETE),
        ({"KV-Operation": "PURGE", "Nats-Rollup": "sub"}, Op.PURGE),
        ({"Nats-Marker-Reason": "MaxAge", "Nats-TTL": "2s", "Nats-Rollup": "sub"}, Op.EXPIRED),
        ({"Nats-Marker-Reason": "Purge"}, Op.PURGE),
        ({"Nats-Marker-Reason": "Remove"}, Op.DELETE),
        ({"KV-Operation": "DEL", "Nats-Marker-Reason": "MaxAge"}, Op.DELETE),
    ],
)
def test_operation_from_headers(headers: dict[str, str] | None, op: Op) -> None:
    assert op_from_headers(headers) is op


def test_timestamps_keep_microseconds_and_utc() -> None:
    parsed = parse_timestamp("2026-11-22T01:56:26.344916173Z")
    assert parsed == datetime(2026, 11, 22, 1, 56, 26, 344916, tzinfo=UTC)
    assert parse_timestamp("2026-11-22T01:56:26Z").microsecond == 0


def test_ack_reply_subjects_in_both_forms() -> None:
    short = parse_ack_reply("$JS.ACK.PC.C.1.7.3.1795312495381810599.4")
    assert (short.stream, short.consumer, short.stream_seq, short.consumer_seq) == ("PC", "C", 7, 3)
    assert short.pending == 4 and short.time.year == 2026
    long = parse_ack_reply("$JS.ACK.dom.HASH.PC.C.1.7.3.1795312495381810599.4.rnd")
    assert (long.stream, long.stream_seq, long.pending) == ("PC", 7, 4)
    with pytest.raises(ValueError):
        parse_ack_reply("_INBOX.x")


def test_stored_header_blocks_parse_like_nats_py() -> None:
    from jetstream._protocol.message import parse_header_block

    block = b"NATS/1.0\r\nKV-Operation: DEL\r\nNats-TTL:  5s \r\n\r\n"
    assert parse_header_block(block) == {"KV-Operation": "DEL", "Nats-TTL": "5s"}
    assert parse_header_block(b"") == {}
    with pytest.raises(ValueError):
        parse_header_block(b"HTTP/1.1 200 OK\r\n\r\n")


def test_header_validation_refuses_what_would_break_the_header_block() -> None:
    from jetstream.headers import validate_headers

    validate_headers({"App-Id": "x y z", "Empty": ""})
    for bad in ({"": "v"}, {"A B": "v"}, {"A:B": "v"}, {"A": "v\r\nInjected: 1"}, {"A": 1}):
        with pytest.raises(jetstream.InvalidHeaderError):
            validate_headers(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "limits",
    [
        {"max_age": timedelta(0)},
        {"max_age": "60 minutes"},
        {"max_age": 0},
        {"marker_ttl": timedelta(milliseconds=1500)},
        {"max_bytes": 0},
        {"max_bytes": True},
        {"replicas": True},
        {"storage": "disk"},
        {"metadata": {"_nats.level": "1"}},
    ],
)
def test_buckets_and_stores_refuse_the_same_limits(limits: dict[str, object]) -> None:
    for config in (kvstore.BucketConfig, objstore.StoreConfig):
        with pytest.raises(jetstream.InvalidBucketConfigError):
            config(**limits)  # type: ignore[arg-type]


def test_delivery_times_are_exact_microseconds_and_absurd_ones_refused() -> None:
    import random
    from datetime import UTC, datetime, timedelta

    from jetstream._protocol.message import time_of_ns

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rng = random.Random(7)
    last = 253402300799999999999  # 9999-12-31T23:59:59.999999999
    samples = [0, 999, 1_000, 1795312495381810599, 2**32 * 10**9 - 1, 2**32 * 10**9, last]
    samples += [rng.randrange(0, 2**32 * 10**9) for _ in range(20_000)]
    samples += [rng.randrange(2**32 * 10**9, last) for _ in range(2_000)]
    for ns in samples:
        assert time_of_ns(ns) == epoch + timedelta(microseconds=ns // 1_000), ns
    with pytest.raises(ValueError):
        parse_ack_reply("$JS.ACK.PC.C.1.7.3.99999999999999999999999999.4")
