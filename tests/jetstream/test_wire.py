"""HPUB frame encoding (pure logic) and the nats-py hook the fast path relies on."""

from __future__ import annotations

import nats.aio.client

from jetstream._transport.hpub import encode_hpub, fast_path_available


def test_hpub_frame_layout() -> None:
    frame = encode_hpub("a.b", {"Nats-Batch-Id": "x", "K": "v"}, b"data")
    block = b"NATS/1.0\r\nNats-Batch-Id: x\r\nK: v\r\n\r\n"
    assert frame == b"HPUB a.b %d %d\r\n%sdata\r\n" % (len(block), len(block) + 4, block)


def test_empty_payload_and_no_headers() -> None:
    assert encode_hpub("s", {}, b"") == b"HPUB s 12 12\r\nNATS/1.0\r\n\r\n\r\n"


def test_the_installed_nats_py_offers_the_fast_path() -> None:
    """If a nats-py upgrade drops the hook, batches fall back to publish; this says so."""
    assert fast_path_available(nats.aio.client.Client())
