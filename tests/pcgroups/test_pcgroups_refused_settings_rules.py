"""Pure rules that keep members from asking the server for what it always refuses: filters
covering one another (the server's subset rule, exactly), more filter subjects per member
consumer than ``MAX_MEMBER_FILTERS``, member templates it never accepts; and when an instance
may replace a member consumer holding another config (nobody uses it), with the differing
settings named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jetstream
import pcgroups
from jetstream import ConsumerConfig, ConsumerInfo
from jetstream._protocol.models import PriorityGroupState, SequenceInfo
from pcgroups._consumer_use import consumer_in_use, settings_differences
from pcgroups._filter_limits import (
    check_filter_count,
    check_static_filters,
    covering_pair,
    subject_is_subset,
)
from pcgroups._join import MemberJoin
from pcgroups._kind import GroupKind


@pytest.mark.parametrize(
    ("subject", "test", "subset"),
    [
        ("foo.*", ">", True),  # the server's own examples (sublist.go)
        ("foo.*", "*.*", True),
        ("foo.*", "foo.*", True),
        ("foo.*", "foo.bar", False),
        ("S1.*", "S1.>", True),
        ("S1.>", "S1.*", False),
        ("S1.a", "S1.*", True),
        ("S1.a.*", "S1.*.b", False),  # they share S1.a.b, yet neither covers the other
        ("S1", "S1.>", False),
        ("S1.a.b", "S1.>", True),
        (">", "S1.>", False),
        ("a.b", "a.b.c", False),
    ],
)
def test_subset_is_the_servers_rule(subject: str, test: str, subset: bool) -> None:
    assert subject_is_subset(subject, test) is subset


def test_covering_pair_names_the_filters() -> None:
    assert covering_pair(["S1.*", "S1.>"]) == ("S1.*", "S1.>")
    assert covering_pair(["S1.a.*", "S1.*.b", "S2.>"]) is None
    assert covering_pair([]) is None


def test_the_filter_limit_is_named() -> None:
    check_filter_count(pcgroups.MAX_MEMBER_FILTERS, "at the limit")
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="2,048") as info:
        check_filter_count(pcgroups.MAX_MEMBER_FILTERS + 1, "one more")
    assert "MAX_MEMBER_FILTERS" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_static_groups_biggest_member_is_held_to_the_limit() -> None:
    limit = pcgroups.MAX_MEMBER_FILTERS
    fits = pcgroups.StaticConfig(max_members=limit * 3, members=("c", "a", "b"))
    check_static_filters(fits, 1 << 20)  # limit partitions each
    over = pcgroups.StaticConfig(max_members=limit * 3 + 1, members=("c", "a", "b"))
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="'a'"):  # a gets one more
        check_static_filters(over, 1 << 20)
    doubled = pcgroups.StaticConfig(max_members=limit, members=("a", "b"), filters=("x", "y.>"))
    check_static_filters(doubled, 1 << 20)  # limit / 2 partitions x 2 filters
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="covers"):
        check_static_filters(
            pcgroups.StaticConfig(max_members=2, members=("a",), filters=("x.*", "x.y")), 1 << 20
        )
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="max_payload"):
        check_static_filters(pcgroups.StaticConfig(max_members=2, members=("a",)), 100)
    nobody = pcgroups.StaticConfig(max_members=limit * 10)
    check_static_filters(nobody, 1 << 20)


@pytest.mark.parametrize(
    "template",
    [
        ConsumerConfig(deliver_subject="push.here"),
        ConsumerConfig(max_deliver=1, backoff=[1, 2]),
        ConsumerConfig(deliver_policy="all", opt_start_seq=5),
        ConsumerConfig(deliver_policy="by_start_sequence"),
        ConsumerConfig(deliver_policy="by_start_time"),
        ConsumerConfig(deliver_policy="new", opt_start_time=datetime.now(UTC)),
        ConsumerConfig(deliver_policy="sideways"),  # type: ignore[arg-type]
        ConsumerConfig(replay_policy="fast"),  # type: ignore[arg-type]
        ConsumerConfig(sample_freq="often"),
        ConsumerConfig(max_expires=timedelta(microseconds=10)),
        ConsumerConfig(description="d" * 4097),
        ConsumerConfig(metadata={"k": "v" * 128 * 1024}),
    ],
)
def test_templates_the_server_never_accepts_are_refused_at_once(template: ConsumerConfig) -> None:
    for consume in (pcgroups.consume_static, pcgroups.consume_elastic):
        with pytest.raises(pcgroups.InvalidMemberConfigError):
            consume(None, "orders", "g", "m1", config=template)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "template",
    [
        ConsumerConfig(max_deliver=2, backoff=[1, 2]),
        ConsumerConfig(max_deliver=-1, backoff=[1, 2, 3]),
        ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=5),
        ConsumerConfig(deliver_policy="by_start_time", opt_start_time=datetime.now(UTC)),
        ConsumerConfig(deliver_policy="new", sample_freq="30%"),
        ConsumerConfig(description="d" * 4096, metadata={"k": "v"}),
    ],
)
def test_templates_the_server_accepts_pass(template: ConsumerConfig) -> None:
    member = pcgroups.consume_elastic(None, "orders", "g", "m1", config=template)  # type: ignore[arg-type]
    assert member.member == "m1"


def kind(elastic: bool) -> GroupKind:
    make = pcgroups.consume_elastic if elastic else pcgroups.consume_static
    return make(None, "orders", "g", "m1")._kind  # type: ignore[arg-type]


def test_a_config_another_client_wrote_is_held_to_the_same_limits() -> None:
    too_many = pcgroups.ElasticConfig(max_members=pcgroups.MAX_MEMBER_FILTERS + 1, members=("m1",))
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
        kind(True).consumer_config(too_many)
    shared = pcgroups.ElasticConfig(
        max_members=pcgroups.MAX_MEMBER_FILTERS + 1, members=("m1", "m2")
    )
    assert kind(True).consumer_config(shared) is not None  # half of them each
    covering = pcgroups.StaticConfig(max_members=2, members=("m1",), filters=("S1.*", "S1.>"))
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="covers"):
        kind(False).consumer_config(covering)
    mapped = pcgroups.StaticConfig(
        max_members=2,
        filters=("S1.*", "S1.>"),  # orbit ignores the filters of mapped members: "<p>.>"
        member_mappings=(pcgroups.MemberMapping("m1", (0, 1)),),
    )
    assert kind(False).consumer_config(mapped) is not None


NOW = datetime(2030, 1, 1, tzinfo=UTC)
LONG_AGO = NOW - timedelta(minutes=5)


def info(**state: object) -> ConsumerInfo:
    fields: dict[str, object] = {
        "config": ConsumerConfig(ack_wait=2),
        "created": LONG_AGO,
        "ts": NOW,
        **state,
    }
    return ConsumerInfo(**fields)  # type: ignore[arg-type]


def pinned(pin: str) -> list[PriorityGroupState]:
    return [PriorityGroupState(group="PCG", pinned_client_id=pin, pinned_ts=NOW)]


@pytest.mark.parametrize(
    ("state", "busy"),
    [
        ({}, False),
        ({"priority_groups": pinned("theirs")}, True),
        ({"priority_groups": pinned("mine")}, False),  # this instance's own pin
        ({"num_waiting": 1}, True),
        ({"num_ack_pending": 1, "delivered": SequenceInfo(1, 1, NOW - timedelta(seconds=1))}, True),
        (
            {"num_ack_pending": 1, "delivered": SequenceInfo(1, 1, NOW - timedelta(seconds=3))},
            False,
        ),
        ({"created": NOW - timedelta(seconds=1)}, True),  # its creator's first pull may come
        ({"created": NOW - timedelta(seconds=3)}, False),
        ({"created": NOW - timedelta(seconds=1), "delivered": SequenceInfo(2, 2, LONG_AGO)}, False),
    ],
)
def test_a_consumer_is_in_use_while_an_instance_may_work_with_it(
    state: dict[str, object], busy: bool
) -> None:
    assert (consumer_in_use(info(**state), bound=None, pin="mine") is not None) is busy


def test_the_consumer_this_instance_used_is_not_just_created_by_another() -> None:
    fresh = info(created=NOW - timedelta(seconds=1))
    assert consumer_in_use(fresh, bound=NOW - timedelta(seconds=1), pin="") is None


def test_settings_differences_name_the_field_and_both_values() -> None:
    existing = ConsumerConfig(
        ack_wait=2,
        max_ack_pending=1,
        max_deliver=-1,
        filter_subjects=["0.>"],
        metadata={"_nats.level": "1", "team": "a"},
    )
    desired = ConsumerConfig(ack_wait=3, max_ack_pending=1, filter_subjects=["1.>"])
    assert settings_differences(existing, desired) == ["ack_wait 2s (this instance: 3s)"]
    assert settings_differences(existing, ConsumerConfig(metadata={"team": "b"})) == [
        "metadata {'team': 'a'} (this instance: {'team': 'b'})"
    ]
    same = ConsumerConfig(ack_wait=2, metadata={"team": "a"}, filter_subjects=["9.>"])
    assert settings_differences(existing, same) == []


def test_only_the_same_refusal_three_times_in_a_row_ends_a_member() -> None:
    joining = MemberJoin(None, kind(True))  # type: ignore[arg-type]

    def refusal(err_code: int, code: int = 400) -> jetstream.ServerError:
        return jetstream.ServerError("refused", code=code, err_code=err_code)

    passing = [
        refusal(10100),  # work-queue filters overlap while members apply a change
        jetstream.ConsumerExistsError("made meanwhile", code=400, err_code=10148),
        refusal(10008, code=503),  # the server cannot answer now (a leader election)
        jetstream.RequestTimeoutError("no answer"),
    ]
    for error in passing:
        for _ in range(3):
            joining._count_refusal(error)
    joining._count_refusal(refusal(10138))
    joining._count_refusal(refusal(10138))
    joining._count_refusal(refusal(10116))  # another one: counting starts again
    joining._count_refusal(refusal(10116))
    with pytest.raises(pcgroups.MemberConsumerRefusedError) as ended:
        joining._count_refusal(refusal(10116))
    assert (ended.value.code, ended.value.err_code, ended.value.member) == (400, 10116, "m1")
    for _ in range(2):  # the stream deleted (404), a setting a durable cannot change (500)
        joining._count_refusal(refusal(10059, code=404))
    with pytest.raises(pcgroups.MemberConsumerRefusedError):
        joining._count_refusal(refusal(10059, code=404))
    for _ in range(2):
        joining._count_refusal(refusal(10012, code=500))
    with pytest.raises(pcgroups.MemberConsumerRefusedError):
        joining._count_refusal(refusal(10012, code=500))


def test_errors_are_in_the_tree() -> None:
    assert issubclass(pcgroups.InvalidMemberConfigError, jetstream.ClientValidationError)
    assert issubclass(pcgroups.MemberConsumerRefusedError, jetstream.JetStreamError)
