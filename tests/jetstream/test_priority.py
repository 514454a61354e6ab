"""Priority-group pieces without a server: the pin a consumer's pulls carry, the 423 mapping,
pull bodies with ``group`` / ``id``, group names, and the config / state models."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

import jetstream
from jetstream._consume.priority import PriorityPin
from jetstream._consume.pull_window import PullRequest
from jetstream._protocol import status as st
from jetstream._protocol.duration import encode_hook
from jetstream._protocol.names import validate_priority_group


def test_the_pin_follows_delivered_messages_and_is_dropped_on_423() -> None:
    pin = PriorityPin("PCG")
    assert pin.fields() == {"group": "PCG"}
    pin.seen({"Nats-Pin-Id": "abc"})
    assert pin.fields() == {"group": "PCG", "id": "abc"}
    pin.seen({})  # a message without the header keeps the pin
    pin.seen(None)
    assert pin.id == "abc"
    pin.seen({"Nats-Pin-Id": "new"})  # pinned anew by the server
    assert pin.id == "new"
    pin.lost()
    assert pin.fields() == {"group": "PCG"}


def test_423_maps_to_a_pull_error_the_pull_engine_handles() -> None:
    error = st.status_error("423", "Nats-Wrong-Pin-Id", what="pull")
    assert type(error) is jetstream.PinIdMismatchError
    assert isinstance(error, jetstream.PullRequestError)
    assert error.code == 423
    assert st.PIN_MISMATCH == "423"


def test_pull_bodies_carry_group_and_pin() -> None:
    pull = PullRequest(batch=5, max_bytes=0, expires=1.0, heartbeat=0.5)
    assert msgspec.json.decode(pull.encode()) == {
        "batch": 5,
        "expires": 1_000_000_000,
        "idle_heartbeat": 500_000_000,
    }
    body = msgspec.json.decode(pull.encode({"group": "PCG", "id": "abc"}))
    assert (body["group"], body["id"], body["batch"]) == ("PCG", "abc", 5)


@pytest.mark.parametrize("name", ["PCG", "a", "abcdefghij012345", "a-b_c/d=e"])
def test_valid_group_names(name: str) -> None:
    assert validate_priority_group(name) == name


@pytest.mark.parametrize("name", ["", "abcdefghij0123456", "a.b", "sp ace", "a*", 3])
def test_invalid_group_names(name: object) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        validate_priority_group(name)  # type: ignore[arg-type]


def test_config_round_trips_the_server_json() -> None:
    config = jetstream.ConsumerConfig(
        durable_name="C",
        ack_policy="explicit",
        priority_groups=["PCG"],
        priority_policy="pinned_client",
        priority_timeout=timedelta(seconds=2),
    )
    wire = msgspec.json.decode(msgspec.json.encode(config, enc_hook=encode_hook))
    assert wire["priority_groups"] == ["PCG"]
    assert wire["priority_policy"] == "pinned_client"
    assert wire["priority_timeout"] == 2_000_000_000
    plain = msgspec.json.decode(
        msgspec.json.encode(jetstream.ConsumerConfig(durable_name="C"), enc_hook=encode_hook)
    )
    assert not {"priority_groups", "priority_policy", "priority_timeout"} & set(plain)


def test_consumer_info_decodes_the_group_state_as_2_15_1_sends_it() -> None:
    from jetstream._protocol.json_api import decode_reply

    reply = (
        b'{"stream_name":"S","name":"C","priority_groups":[{"group":"PCG",'
        b'"pinned_client_id":"abc","pinned_ts":"2026-11-23T14:15:55.017580023Z"}],'
        b'"config":{"durable_name":"C","ack_policy":"explicit","priority_groups":["PCG"],'
        b'"priority_policy":"pinned_client","priority_timeout":2000000000}}'
    )
    info = decode_reply(reply, jetstream.ConsumerInfo)
    (state,) = info.priority_groups or []
    assert state.pinned and state.pinned_client_id == "abc"
    assert info.config is not None and info.config.priority_timeout == timedelta(seconds=2)
    unpinned = decode_reply(
        b'{"priority_groups":[{"group":"PCG","pinned_ts":"0001-01-01T00:00:00Z"}]}',
        jetstream.ConsumerInfo,
    )
    assert [s.pinned for s in unpinned.priority_groups or []] == [False]
