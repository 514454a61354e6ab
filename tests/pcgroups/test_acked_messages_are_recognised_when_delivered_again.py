"""A group member recognises a message it acknowledged when the server delivers it again (its
ack lost in a server crash) by the stored message's stream sequence and time, whatever the
delivery count, consumer sequence and pending count of the new delivery say."""

from __future__ import annotations

from jetstream._consume.pull_message import PullMessage
from jetstream._protocol.message import stored_message_id
from pcgroups._acked import AckedMessages

TIME = 1732700000123456789


def delivery(sseq: int, *, delivered: int = 1, dseq: int = 1, ts: int = TIME) -> PullMessage:
    reply = f"$JS.ACK.ORDERS-g.m1.{delivered}.{sseq}.{dseq}.{ts}.{7 - delivered}"
    return PullMessage("0.orders.k1", reply, b"", {}, 0, None)  # type: ignore[arg-type]


def test_a_redelivery_of_an_acked_message_is_recognised() -> None:
    acked = AckedMessages()
    acked.add(delivery(5, dseq=9))
    assert delivery(5, delivered=1, dseq=3) in acked  # after a crash: delivered 1 again
    assert delivery(5, delivered=4, dseq=12) in acked
    assert delivery(6) not in acked


def test_the_same_sequence_in_a_stream_made_again_is_another_message() -> None:
    acked = AckedMessages()
    acked.add(delivery(5))
    assert delivery(5, ts=TIME + 1) not in acked


def test_only_the_most_recent_acks_are_remembered() -> None:
    acked = AckedMessages(size=3)
    for sseq in range(1, 5):
        acked.add(delivery(sseq))
    acked.add(delivery(4))  # again: still one entry
    assert [delivery(s) in acked for s in range(1, 5)] == [False, True, True, True]


def test_the_long_ack_reply_form_names_the_same_message() -> None:
    short = delivery(5).reply
    long = f"$JS.ACK.hub.ACCHASH.ORDERS-g.m1.2.5.4.{TIME}.0.r4nd0m"
    assert stored_message_id(long) == stored_message_id(short) == f"5 {TIME}"


def test_a_delivery_without_an_ack_reply_is_never_taken_for_an_acked_one() -> None:
    acked = AckedMessages()
    odd = PullMessage("0.orders.k1", "_INBOX.x", b"", {}, 0, None)  # type: ignore[arg-type]
    acked.add(odd)
    assert odd not in acked
