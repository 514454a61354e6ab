"""Pure parts of a group member: the consumer it creates (orbit's names and settings) and the
message wrapper (subject without the partition token, settling, nak delays)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import jetstream
import pcgroups
from jetstream._consume.pull_message import PullMessage
from pcgroups._consume import GroupKind


def kind(js: object, elastic: bool, template: jetstream.ConsumerConfig | None = None) -> GroupKind:
    make = pcgroups.consume_elastic if elastic else pcgroups.consume_static
    member = make(js, "orders", "g", "m1", config=template)  # type: ignore[arg-type]
    return member._kind


def test_elastic_member_consumer_is_shaped_like_orbits() -> None:
    config = pcgroups.ElasticConfig(max_members=4, members=("m1", "m2"))
    consumer = kind(None, True).consumer_config(config)
    assert consumer is not None
    assert consumer.name == "m1" and not consumer.durable_name
    assert consumer.filter_subjects == ["0.>", "1.>"]
    assert consumer.priority_groups == ["PCG"]
    assert consumer.priority_policy == "pinned_client"
    assert consumer.ack_policy == "explicit"
    assert consumer.ack_wait == timedelta(seconds=5)  # orbit's default
    assert consumer.priority_timeout == timedelta(seconds=5)
    assert consumer.inactive_threshold == timedelta(seconds=5)


def test_static_member_consumer_is_a_durable_with_the_users_settings() -> None:
    config = pcgroups.StaticConfig(max_members=3, members=("m1",), filters=("a.>",))
    template = jetstream.ConsumerConfig(ack_wait=timedelta(milliseconds=500), max_ack_pending=1)
    k = kind(None, False, template)
    consumer = k.consumer_config(config)
    assert consumer is not None
    assert consumer.durable_name == "g-m1" and not consumer.name
    assert consumer.filter_subjects == ["0.a.>", "1.a.>", "2.a.>"]
    assert consumer.max_ack_pending == 1
    assert consumer.priority_timeout == timedelta(seconds=1)  # max(ack_wait, 1 s)
    assert consumer.inactive_threshold is None
    assert k.pull_expires == 1.0  # max(ack_wait / 2, 1 s)


def test_a_member_without_partitions_has_no_consumer() -> None:
    config = pcgroups.ElasticConfig(max_members=1, members=("a0", "m1"))
    assert kind(None, True).consumer_config(config) is None


def test_bad_names_and_config_are_refused_at_once() -> None:
    with pytest.raises(pcgroups.InvalidGroupNameError):
        pcgroups.consume_elastic(None, "orders", "g", "a b")  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError):
        pcgroups.consume_elastic(None, "orders", "g", "m1", config={})  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError, match="confirm_acks"):
        pcgroups.consume_static(None, "orders", "g", "m1", confirm_acks="yes")  # type: ignore[arg-type]


def message(subject: str) -> pcgroups.GroupMessage:
    delivered = PullMessage(subject, "$JS.ACK.x", b"d", {"a": "b"}, 1, None)  # type: ignore[arg-type]
    return pcgroups.GroupMessage(delivered, lambda m, final: None)


def test_message_subject_has_no_partition_token() -> None:
    msg = message("3.orders.k1")
    assert (msg.subject, msg.partition, msg.data, msg.headers) == ("orders.k1", 3, b"d", {"a": "b"})
    assert message("x.y").partition == -1


async def test_a_negative_nak_delay_is_refused_before_sending() -> None:
    with pytest.raises(jetstream.ClientValidationError):
        await message("0.a").nak(delay=-1)
