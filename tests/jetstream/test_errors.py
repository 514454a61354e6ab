"""The error tree and the err_code registry."""

from __future__ import annotations

import pytest

import jetstream
import kvstore
from jetstream import ClientValidationError, WrongTypeError
from jetstream._errors import check_count, connection_error, error_from_api


@pytest.mark.parametrize(
    ("err_code", "cls"),
    [
        (10059, jetstream.StreamNotFoundError),
        (10008, jetstream.UnavailableError),
        (10009, jetstream.UnavailableError),
        (10163, jetstream.UnavailableError),
        (10158, jetstream.MessageIdInProcessError),
        (10058, jetstream.StreamExistsError),
        (10037, jetstream.MessageNotFoundError),
        (10071, jetstream.WrongLastSequenceError),
        (10164, jetstream.WrongLastSequenceError),
        (10054, jetstream.MessageTooLargeError),
        (10165, jetstream.MessageTTLInvalidError),
        (10199, jetstream.BatchLimitExceededError),
        (10166, jetstream.MessageTTLDisabledError),
        (10185, jetstream.UnsupportedServerFeatureError),
        (10052, jetstream.InvalidStreamConfigError),
        (10025, jetstream.InvalidStreamConfigError),
        (10077, jetstream.StorageLimitError),
        (99999, jetstream.ServerError),
    ],
)
def test_registry_maps_err_codes(err_code: int, cls: type[Exception]) -> None:
    error = error_from_api(400, err_code, "text")
    assert type(error) is cls
    assert isinstance(error, jetstream.JetStreamError)
    assert (error.code, error.err_code, error.description) == (400, err_code, "text")
    assert "err_code=" in str(error)


def test_wrong_last_sequence_reports_the_actual_sequence() -> None:
    assert error_from_api(400, 10071, "wrong last sequence: 19").last_sequence == 19  # type: ignore[attr-defined]
    assert error_from_api(400, 10164, "wrong last sequence").last_sequence is None  # type: ignore[attr-defined]


def test_client_errors_are_value_errors_and_kv_errors_are_catchable_by_name() -> None:
    for cls in (
        kvstore.InvalidKeyError,
        kvstore.InvalidTTLError,
        kvstore.InvalidBucketNameError,
        kvstore.InvalidBucketConfigError,
        kvstore.ValueTooLargeError,
    ):
        assert issubclass(cls, ValueError)
        assert issubclass(cls, jetstream.JetStreamError)
    assert issubclass(kvstore.KeyNotFoundError, jetstream.MessageNotFoundError)
    assert issubclass(kvstore.WrongRevisionError, jetstream.WrongLastSequenceError)
    assert issubclass(kvstore.KeyExistsError, jetstream.WrongLastSequenceError)
    assert issubclass(kvstore.BucketNotFoundError, jetstream.StreamNotFoundError)
    assert issubclass(jetstream.RequestTimeoutError, TimeoutError)


def test_kv_errors_name_the_key() -> None:
    error = kvstore.WrongRevisionError("a.b", 3, 5, err_code=10071)
    assert (error.key, error.expected, error.current) == ("a.b", 3, 5)
    assert "'a.b'" in str(error) and "expected 3" in str(error)
    assert kvstore.KeyNotFoundError("zip").key == "zip"


def test_unsupported_feature_names_the_feature() -> None:
    error = jetstream.UnsupportedServerFeatureError(
        feature="atomic batch publish", required_level=2, server_level=1
    )
    assert "atomic batch publish" in str(error) and "level 2" in str(error)


def test_a_failed_connect_is_typed_by_what_the_attempts_said() -> None:
    refused = connection_error(
        ["nats://app:pw@127.0.0.1:4222", "tls://127.0.0.1:4223"],
        [OSError("connect call failed"), Exception("nats: 'Authorization Violation'")],
    )
    assert isinstance(refused, jetstream.AuthenticationError)
    assert str(refused) == (
        "nats://127.0.0.1:4222, tls://127.0.0.1:4223 refused the credentials: "
        "nats: 'Authorization Violation'"
    )
    unreachable = connection_error(["127.0.0.1:4222"], [OSError("connect call failed")])
    assert type(unreachable) is jetstream.ConnectionFailedError
    assert isinstance(unreachable, ConnectionError)
    assert str(unreachable) == "cannot connect to 127.0.0.1:4222: connect call failed"
    silent = connection_error(["nats://h:1"], [])
    assert str(silent) == "cannot connect to nats://h:1: no server reachable"


@pytest.mark.parametrize(
    ("value", "error"),
    [("4", WrongTypeError), (True, WrongTypeError), (4.0, WrongTypeError), (0, None), (9, None)],
)
def test_check_count_refuses_what_is_not_an_int_in_range(value: object, error: type | None) -> None:
    """A "4" from a job's config compared with an int raised a raw TypeError (upload_objects,
    store.put's chunk_size); it is a typed error naming the argument."""
    with pytest.raises(error or ClientValidationError, match="concurrency"):
        check_count(value, "concurrency", 1, 8)
    assert check_count(8, "concurrency", 1, 8) == 8
