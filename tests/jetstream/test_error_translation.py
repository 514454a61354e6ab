"""One translator per kind of server answer: every ``err_code`` maps to a server error (never
to a client-validation error, which promises that nothing was sent), and a pull's status
lines become typed errors through the status mapper, naming the consumer they are about."""

from __future__ import annotations

import pytest

import jetstream
from jetstream import ConsumerConfig, StreamConfig
from jetstream._errors import ClientValidationError, ServerError, error_from_api
from jetstream._protocol import status as st


def _registered() -> dict[int, type[Exception]]:
    codes: dict[int, type[Exception]] = {}
    pending: list[type[jetstream.JetStreamError]] = [jetstream.JetStreamError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        codes.update(dict.fromkeys(cls.__dict__.get("err_codes", ()), cls))
    return codes


def test_every_registered_server_code_is_a_server_error_and_no_value_error() -> None:
    registered = _registered()
    assert {10165, 10199} <= registered.keys()
    for code, cls in registered.items():
        error = error_from_api(400, code, "refused")
        assert isinstance(error, ServerError), (code, cls)
        assert not isinstance(error, ClientValidationError), (code, cls)


@pytest.mark.parametrize(
    ("status", "description", "cls"),
    [
        (st.NO_RESPONDERS, "", jetstream.NoRespondersError),
        (st.CONFLICT, st.CONSUMER_DELETED, jetstream.ConsumerDeletedError),
        (st.CONFLICT, st.SIZE_EXCEEDS_MAX_BYTES, jetstream.MessageTooLargeForPullError),
        (st.CONFLICT, "Exceeded MaxWaiting", jetstream.PullRequestError),
        (st.PIN_MISMATCH, "Nats-Wrong-Pin-Id", jetstream.PinIdMismatchError),
    ],
)
def test_pull_statuses_map_to_typed_errors_naming_the_pull(
    status: str, description: str, cls: type[Exception]
) -> None:
    what = "pull from ORDERS/c"
    error = st.status_error(status, description, what=what, default=jetstream.PullRequestError)
    assert type(error) is cls
    assert str(error).startswith(what)
    assert error.code == int(status)


async def test_a_fetch_from_a_deleted_consumer_names_the_consumer(
    js: jetstream.JetStream, unique_name: object
) -> None:
    stream = unique_name("S")  # type: ignore[operator]
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="gone"))
    await js.delete_consumer(stream, "gone")
    with pytest.raises(jetstream.NoRespondersError) as raised:
        async for _ in consumer.fetch(max_messages=1, expires=1):
            pass
    assert f"{stream}/gone" in str(raised.value)
    await js.delete_stream(stream)
