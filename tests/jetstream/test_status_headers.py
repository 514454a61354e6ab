"""Values another client stored with a header named ``Status`` (nats-py reports a status line
and such a header alike) are values: every read returns them, on our delivery route and on
nats-py's path. Before, a stored ``Status: 404`` made ``get`` say "not found", made
``get_many`` never return (its consumer fallback re-pulled the same message forever), a
``Status: 100`` value vanished from watches as an idle heartbeat, and ``get`` of a
``Status: 503`` value raised NoRespondersError (nats-py's ``request()`` took it for one)."""

from __future__ import annotations

import asyncio

import nats
import pytest

import jetstream
import kvstore
from jetstream._transport.delivery import route_of
from tests.conftest import BucketFactory
from tests.raw_nats import raw_publish

pytestmark = pytest.mark.integration

STATUS_VALUES = {
    "nf": (b"NATS/1.0\r\nStatus: 404\r\n\r\n", b"v-nf"),
    "empty": (b"NATS/1.0\r\nStatus: 404\r\nDescription: No Messages\r\n\r\n", b""),
    "hb": (b"NATS/1.0\r\nStatus: 100\r\nDescription: Idle Heartbeat\r\n\r\n", b""),
    "timeout": (b"NATS/1.0\r\nStatus: 408\r\nDescription: Request Timeout\r\n\r\n", b"v-to"),
    "busy": (b"NATS/1.0\r\nStatus: 503\r\n\r\n", b"v-busy"),
    "eob": (b"NATS/1.0\r\nStatus: 204\r\nDescription: EOB\r\n\r\n", b"v-eob"),
}


async def _reads(bucket: kvstore.Bucket, keys: list[str]) -> list[object]:
    singles = {key: (await bucket.get(key)).value for key in keys}
    snapshot = await bucket.get_many(keys)
    many = {key: entry.value for key, entry in snapshot.items()}
    watched: dict[str, bytes] = {}
    async with bucket.watch() as watcher:
        async for entry in watcher:
            watched[entry.key] = entry.value
            if len(watched) == len(keys):
                break
    listed = sorted([key async for key in bucket.keys()])
    history = {key: [e.value async for e in bucket.history(key)] for key in keys}
    return [singles, many, sorted(snapshot.missing), watched, listed, history]


async def test_values_stored_with_a_status_header_read_as_values(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    name = (await make_bucket()).name
    keys = sorted(STATUS_VALUES)
    frames = [(f"$KV.{name}.{key}", block, data) for key, (block, data) in STATUS_VALUES.items()]
    await raw_publish(nats_server.url, frames)
    expected_values = {key: data for key, (_, data) in STATUS_VALUES.items()}
    nc = await nats.connect(nats_server.url)
    try:
        plain = jetstream.JetStream(nc)
        assert route_of(js.nc) is not None and route_of(plain.nc) is None
        for ctx in (js, plain):
            reads = await asyncio.wait_for(_reads(await kvstore.open_bucket(ctx, name), keys), 30)
            singles, many, missing, watched, listed, history = reads
            assert singles == many == watched == expected_values
            assert missing == [] and listed == keys
            assert history == {key: [value] for key, value in expected_values.items()}
    finally:
        await nc.close()
