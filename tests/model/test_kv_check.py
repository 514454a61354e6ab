"""The KV model's checker on hand-made histories: each promise it checks is shown broken once
(so a model run that passes means something) and a valid history passes."""

from __future__ import annotations

import asyncio
import time

import jetstream
from kvstore import Entry, KeyNotFoundError, Op, Snapshot, WrongRevisionError

from .harness import Call
from .kv_check import KvOutcome, Msg, check_kv, value_of

_ids = iter(range(1, 10_000))


def call(kind: str, start: float, end: float, result: object = None, **args: object) -> Call:
    made = Call(next(_ids), 0, kind, dict(args), start=start, end=end, result=result)
    return made


def failed(kind: str, start: float, end: float, error: BaseException, **args: object) -> Call:
    made = call(kind, start, end, **args)
    made.error = error
    return made


def entry(key: str, revision: int, value: bytes, op: Op = Op.PUT) -> Entry:
    return Entry("b", key, value, revision, time.time_ns(), op)


def put(key: str, seq: int, start: float, end: float) -> tuple[Call, Msg]:
    made = call("put", start, end, seq, key=key, ttl=None)
    return made, Msg(seq, key, "PUT", value_of(made.op_id, key))


def outcome(calls: list[Call], final: list[Msg], **extra: object) -> KvOutcome:
    return KvOutcome(history=1, calls=calls, final=final, **extra)  # type: ignore[arg-type]


def test_a_valid_history_passes() -> None:
    write, msg = put("a", 1, 0, 1)
    read = call("get", 2, 3, entry("a", 1, msg.value), key="a")
    assert check_kv(outcome([write, read], [msg])) == []


def test_an_acknowledged_write_missing_from_the_stream_is_reported() -> None:
    write, _ = put("a", 1, 0, 1)
    assert any("acknowledged write lost" in v for v in check_kv(outcome([write], [])))


def test_a_write_removed_by_a_later_purge_is_not_lost() -> None:
    write, _ = put("a", 1, 0, 1)
    purge = call("purge", 2, 3, 2, key="a")
    assert check_kv(outcome([write, purge], [Msg(2, "a", "PURGE")])) == []


def test_a_write_rolled_up_by_a_later_ttl_write_is_not_lost() -> None:
    write, _ = put("a", 1, 0, 1)
    expiring = call("put", 2, 3, 2, key="a", ttl="1s")
    history = outcome([write, expiring], [Msg(2, "a", "PUT", value_of(expiring.op_id, "a"))])
    history.history = 4
    assert check_kv(history) == []
    expiring.args["ttl"] = None  # a plain write keeps the earlier revision (history 4)
    assert any("lost: Msg(seq=1" in v for v in check_kv(history))


def test_a_read_older_than_an_acknowledged_write_is_stale() -> None:
    first, first_msg = put("a", 1, 0, 1)
    second, second_msg = put("a", 2, 1, 2)
    read = call("get", 3, 4, entry("a", 1, first_msg.value), key="a")
    history = outcome([first, second, read], [first_msg, second_msg])
    history.history = 4
    assert any("stale read" in v for v in check_kv(history))


def test_not_found_for_a_value_nothing_could_remove_is_reported() -> None:
    write, msg = put("a", 1, 0, 1)
    read = failed("get", 2, 3, KeyNotFoundError("a"), key="a")
    assert any("get missed live" in v for v in check_kv(outcome([write, read], [msg])))


def test_a_snapshot_inside_a_batch_is_torn() -> None:
    batch = call("put_many", 0, 1, {"a": 1, "b": 2}, keys=["a", "b"], expect={})
    final = [
        Msg(1, "a", "PUT", value_of(batch.op_id, "a")),
        Msg(2, "b", "PUT", value_of(batch.op_id, "b")),
    ]
    snapshot = Snapshot({"a": entry("a", 1, final[0].value)}, ("b",), 1)
    read = call("get_many", 0.5, 0.6, snapshot, keys=["a", "b"])
    assert any("tears" in v for v in check_kv(outcome([batch, read], final)))


def test_a_snapshot_older_than_an_acknowledged_write_is_reported() -> None:
    first, first_msg = put("a", 1, 0, 1)
    second, second_msg = put("a", 2, 1, 2)
    snapshot = Snapshot({"a": entry("a", 1, first_msg.value)}, (), 1)
    read = call("get_many", 3, 4, snapshot, keys=["a"])
    history = outcome([first, second, read], [first_msg, second_msg])
    history.history = 4
    assert any("older than acked" in v for v in check_kv(history))


def test_an_update_accepted_over_a_newer_revision_is_reported() -> None:
    first, first_msg = put("a", 1, 0, 1)
    second, second_msg = put("a", 2, 1, 2)
    update = call("update", 3, 4, 3, key="a", stale=True, revision=1)
    final = [first_msg, second_msg, Msg(3, "a", "PUT", value_of(update.op_id, "a"))]
    history = outcome([first, second, update], final)
    history.history = 4
    assert any("CAS accepted over newer" in v for v in check_kv(history))


def test_a_refused_update_whose_revision_was_never_replaced_is_reported() -> None:
    write, msg = put("a", 1, 0, 1)
    update = failed(
        "update", 2, 3, WrongRevisionError("a", 1, 1, err_code=10071), key="a", revision=1
    )
    assert any("CAS refused" in v for v in check_kv(outcome([write, update], [msg])))


def test_half_of_a_batch_with_an_unknown_outcome_is_reported() -> None:
    batch = failed(
        "put_many",
        0,
        1,
        jetstream.CommitUnknownError("lost", msg_ids=[]),
        keys=["a", "b"],
        expect={},
    )
    final = [Msg(5, "a", "PUT", value_of(batch.op_id, "a"))]
    assert any("half a batch" in v for v in check_kv(outcome([batch], final)))


def test_an_abandoned_batch_leaves_no_value() -> None:
    batch = call("batch_abandon", 0, 1, "abandoned", keys=["a"])
    final = [Msg(1, "a", "PUT", value_of(batch.op_id, "a"))]
    assert any("yet stored" in v for v in check_kv(outcome([batch], final)))


def test_writes_out_of_real_time_order_are_not_linearizable() -> None:
    first, first_msg = put("a", 2, 0, 1)
    second, second_msg = put("b", 1, 2, 3)
    found = check_kv(outcome([first, second], [second_msg, first_msg]))
    assert any("not linearizable" in v for v in found)


def test_a_watch_that_misses_or_repeats_a_revision_is_reported() -> None:
    one, one_msg = put("a", 1, 0, 1)
    two, two_msg = put("b", 2, 0, 1)
    final = [one_msg, two_msg]
    missing = check_kv(outcome([one, two], final, watches={99: (1, [one_msg])}))
    repeated = check_kv(outcome([one, two], final, watches={99: (1, [one_msg, one_msg, two_msg])}))
    assert any("missed retained revisions [2]" in v for v in missing)
    assert any("out of order or repeated" in v for v in repeated)


def test_errors_outside_the_tree_and_hung_calls_are_reported() -> None:
    raw = failed("get", 0, 1, KeyError("a"), key="a")
    hung = call("get", 0, 1, key="a")
    hung.hung = True
    cancelled = failed("get", 0, 1, asyncio.CancelledError(), key="a")
    cancelled.cancelled = True
    found = check_kv(outcome([raw, hung, cancelled], []))
    assert sum("outside the JetStreamError tree" in v for v in found) == 1
    assert sum("outlived" in v for v in found) == 1
