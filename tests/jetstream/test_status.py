"""The one mapping of header-only status answers (and of nats-py's errors) into the tree."""

from __future__ import annotations

import socket
import ssl

import nats.errors
import pytest

import jetstream
from jetstream._errors import connection_error
from jetstream._protocol import status as st
from jetstream._transport.connection import describe_failure
from jetstream._transport.nats_errors import from_nats, nats_errors


def test_status_of_reads_status_and_description() -> None:
    assert st.status_of(None) == (None, "")
    assert st.status_of({"Nats-Sequence": "4"}) == (None, "")
    headers = {"Status": "409", "Description": " Consumer Deleted "}
    assert st.status_of(headers) == ("409", "Consumer Deleted")
    assert st.status_of({"Status": "100"}) == ("100", "")


@pytest.mark.parametrize(
    ("status", "description", "expected", "code"),
    [
        ("503", "", jetstream.NoRespondersError, 503),
        ("404", "Message Not Found", jetstream.MessageNotFoundError, 404),
        ("412", "Min Version", jetstream.UnsupportedServerFeatureError, 412),
        ("409", "Consumer Deleted", jetstream.ConsumerDeletedError, 409),
        ("409", "Exceeded MaxRequestBatch of 10", jetstream.ServerError, 409),
        ("408", "Bad Request", jetstream.ServerError, 408),
        ("413", "Too Many Results", jetstream.ServerError, 413),
        ("400", "Bad Request", jetstream.ServerError, 400),
    ],
)
def test_status_error_maps_into_the_tree(
    status: str, description: str, expected: type[jetstream.JetStreamError], code: int
) -> None:
    error = st.status_error(status, description, what="direct get of k")
    assert type(error) is expected
    assert error.code == code
    assert str(error).startswith("direct get of k")


def test_a_pull_gets_pull_errors_for_what_has_no_own_class() -> None:
    refused = st.status_error(
        "409", "Exceeded MaxWaiting", what="pull", default=jetstream.PullRequestError
    )
    assert type(refused) is jetstream.PullRequestError and refused.code == 409
    deleted = st.status_error(
        "409", st.CONSUMER_DELETED, what="pull", default=jetstream.PullRequestError
    )
    assert type(deleted) is jetstream.ConsumerDeletedError


def test_status_constants_are_the_wire_values() -> None:
    assert (st.HEARTBEAT, st.END_OF_BATCH, st.NOT_FOUND, st.REQUEST_TIMEOUT) == (
        "100",
        "204",
        "404",
        "408",
    )
    assert (st.CONFLICT, st.PRECONDITION_FAILED, st.NO_RESPONDERS) == ("409", "412", "503")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (nats.errors.ConnectionClosedError(), jetstream.ConnectionClosedError),
        (nats.errors.ConnectionDrainingError(), jetstream.ConnectionClosedError),
        (nats.errors.ConnectionReconnectingError(), jetstream.DisconnectedError),
        (nats.errors.OutboundBufferLimitError(), jetstream.DisconnectedError),
        (nats.errors.StaleConnectionError(), jetstream.DisconnectedError),
        (nats.errors.TimeoutError(), jetstream.RequestTimeoutError),
        (nats.errors.FlushTimeoutError(), jetstream.RequestTimeoutError),
        (nats.errors.DrainTimeoutError(), jetstream.RequestTimeoutError),
        (nats.errors.NoRespondersError(), jetstream.NoRespondersError),
        (nats.errors.MaxPayloadError(), jetstream.ValueTooLargeError),
        (nats.errors.BadSubjectError(), jetstream.ClientValidationError),
        (
            nats.errors.SlowConsumerError(subject="s", reply="", sid=1, sub=None),
            jetstream.JetStreamError,
        ),
        # the socket, written by nats-py inline once its flusher task is gone (a loop that
        # is shutting down cancelled it) while the server has gone
        (BrokenPipeError(32, "Broken pipe"), jetstream.DisconnectedError),
        (ConnectionResetError(104, "Connection reset by peer"), jetstream.DisconnectedError),
    ],
)
def test_nats_errors_map_into_the_tree(error: Exception, expected: type[Exception]) -> None:
    mapped = from_nats(error, "publishing to s")
    assert type(mapped) is expected
    assert str(mapped).startswith("publishing to s")
    with pytest.raises(expected) as raised, nats_errors("publishing to s"):
        raise error
    assert raised.value.__cause__ is error


def test_our_own_connection_errors_pass_through_unchanged() -> None:
    ours = jetstream.ConnectionClosedError("closed")  # an OSError too
    with pytest.raises(jetstream.ConnectionClosedError) as raised, nats_errors("publishing"):
        raise ours
    assert raised.value is ours


def test_connection_errors_are_connection_errors() -> None:
    for cls in (jetstream.ConnectionClosedError, jetstream.DisconnectedError):
        assert issubclass(cls, jetstream.JetStreamError) and issubclass(cls, ConnectionError)
    assert not issubclass(jetstream.DisconnectedError, jetstream.ConnectionClosedError)


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (ConnectionRefusedError(111, "Connect call failed"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "DNS lookup failed"),
        (ssl.SSLCertVerificationError("certificate verify failed"), "TLS handshake failed"),
        (TimeoutError(), "timed out"),
        (nats.errors.TimeoutError(), "timed out"),
    ],
)
def test_a_failed_connect_names_its_cause(error: BaseException, words: str) -> None:
    """The DNS case is tested here, not on the network: resolving a name would ask the
    machine's off-host name server."""
    assert describe_failure(error).startswith(words)
    failed = connection_error(
        ["nats://h:4222"], [error, nats.errors.NoServersError()], describe=describe_failure
    )
    assert str(failed).startswith(f"cannot connect to nats://h:4222: {words}")


def test_a_retried_request_says_what_each_attempt_got() -> None:
    from jetstream._api.retries import Tries as _Tries

    tries = _Tries("$JS.API.DIRECT.GET.KV_b")
    errors: list[jetstream.JetStreamError] = [
        jetstream.NoRespondersError("no responders", code=503),
        jetstream.NoRespondersError("no responders", code=503),
        jetstream.RequestTimeoutError("no reply on $JS.API.DIRECT.GET.KV_b within 5s"),
    ]
    for error in errors:
        tries.note(error)
    final = errors[-1]
    tries.explain(final, 20.37)
    assert str(final) == (
        "$JS.API.DIRECT.GET.KV_b: no reply within 20.3s (3 attempts: 503 no responders x2, timeout)"
    )
    single = _Tries("s")
    once = jetstream.RequestTimeoutError("no reply on s within 5s")
    single.note(once)
    single.explain(once, 5.01)
    assert str(once) == "no reply on s within 5s", "one attempt keeps its own words"
