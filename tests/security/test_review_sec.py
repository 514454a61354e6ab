"""Hostile review of the security work (issue 11): records and subjects a hostile peer can
still store that reached a purge filter or a raw exception.

A peer with publish rights stores messages on *literal* subjects with wildcard tokens (the
server accepts ``$KV.b.t.>`` and ``$O.s.C.*`` as publish subjects and stores them as they
are); used as a purge filter, such a subject covers every key or chunk it matches. And a
meta record nested deeper than Python's recursion limit made the decoder raise a raw
``RecursionError`` from every listing, read and delete."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
import objstore
from jetstream._options import ConnectionOptions
from objstore import ObjectStore
from tests.security.test_permissions import _fast_denial, connect, secured

__all__ = ["secured"]  # the module's server with the template users (test_permissions)

DEEP = 20_000  # nesting levels: far beyond any recursion limit, 160 kB (under max_payload)


def _meta_subject(store: str, name: str) -> str:
    return f"$O.{store}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def _deeply_nested() -> bytes:
    """A JSON object whose unknown field nests ``DEEP`` objects (decoders skipping it
    recurse once per level)."""
    return b'{"name":"deep","x":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"


@pytest.mark.parametrize("wildcard", [">", "*"])
async def test_cleanup_never_purges_a_chunk_subject_with_a_wildcard(
    store: ObjectStore, peer: JetStreamContext, wildcard: str
) -> None:
    data = b"honest" * 1000
    await store.put("honest.bin", data)
    await peer.publish(f"$O.{store.name}.C.{wildcard}", b"planted")  # stored as is
    assert await store.cleanup(older_than=timedelta(0)) == 0
    assert await store.get_bytes("honest.bin") == data, "cleanup purged every chunk"


@pytest.mark.parametrize("wildcard", [">", "*"])
async def test_purge_deletes_never_purges_a_key_subject_with_a_wildcard(
    bucket: kvstore.Bucket, peer: JetStreamContext, wildcard: str
) -> None:
    await bucket.put("t.live", b"kept")
    # A peer allowed to write `t.<anything>` tombstones the literal subject `t.>` (or `t.*`).
    await peer.publish(f"$KV.{bucket.name}.t.{wildcard}", b"", headers={"KV-Operation": "DEL"})
    await bucket.purge_deletes(older_than=None)
    assert (await bucket.get("t.live")).value == b"kept", "purge_deletes purged live keys"


async def test_a_deeply_nested_meta_record_is_refused_not_a_recursion_error(
    store: ObjectStore, peer: JetStreamContext, caplog: pytest.LogCaptureFixture
) -> None:
    await store.put("honest.bin", b"h" * 100)
    await peer.publish(
        _meta_subject(store.name, "deep"), _deeply_nested(), headers={"Nats-Rollup": "sub"}
    )
    with caplog.at_level(logging.WARNING, logger="objstore"):
        assert [info.name async for info in store.list()] == ["honest.bin"]
        with pytest.raises(objstore.InvalidObjectMetaError):
            await store.info("deep")
        with pytest.raises(objstore.InvalidObjectMetaError):
            await store.get_bytes("deep")
        assert await store.cleanup(older_than=timedelta(0)) == 0  # unreadable: nothing removed
        await store.delete("deep")  # the record is replaced by a tombstone
    assert "deep" in caplog.text
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("deep")
    assert await store.get_bytes("honest.bin") == b"h" * 100


async def test_a_prefix_writers_get_many_is_refused_at_once(
    secured: jetstream.EmbeddedServer,
) -> None:
    """get_many is not a prefix writer's (its batched direct get takes a body the server cannot
    confine): refused at once, not after the 5 s request timeout."""
    async with await connect(secured, "alice") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await _fast_denial(bucket.get_many(["alice.name"]))


async def test_a_writer_compacts_tombstones(secured: jetstream.EmbeddedServer) -> None:
    """purge_deletes is one of the writes a whole-bucket writer is given."""
    async with await connect(secured, "writer") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put("carol.tmp", b"x")
        await bucket.delete("carol.tmp")
        assert await bucket.purge_deletes(older_than=None) >= 1
        with pytest.raises(kvstore.KeyNotFoundError):
            _ = [entry async for entry in bucket.history("carol.tmp")]


@pytest.mark.parametrize("password", ["pa,ss", "p#w", "p?w"])
def test_a_password_that_breaks_the_servers_list_is_never_shown(password: str) -> None:
    """``servers`` is split at commas (and URLs end their authority at ``#``/``?``): a password
    holding one left ``nats://alice:pa`` (a URL without userinfo, shown whole) in the repr."""
    secret = password.split(",")[0].split("#")[0].split("?")[0]  # the part a split leaves
    text = f"nats://alice:{password}@127.0.0.1:4222"
    try:
        options = ConnectionOptions.from_strings({"servers": text})
    except jetstream.ClientValidationError as error:
        shown = "".join(traceback.format_exception(error)) + repr(error.__context__)
        assert f":{secret}" not in shown and "alice" not in shown
        assert "--password" in str(error), "says how to give it"
    else:
        assert f":{secret}" not in repr(options) and "alice" not in repr(options)


async def test_long_names_in_records_never_cost_the_connection(
    store: ObjectStore, peer: JetStreamContext
) -> None:
    """A request subject over the server's control line makes the server close the connection
    (nats-py then gives up for good). A peer's link to a 6000-character name, or a record with
    a 5000-character nuid, did that to every reader: a 5 s timeout, then every later call
    failed with ConnectionClosedError."""
    await store.put("honest.bin", b"h" * 100)
    record = {"bucket": store.name, "size": 0, "chunks": 0, "mtime": "", "nuid": "N"}
    link = {"link": {"bucket": store.name, "name": "x" * 6000}}
    await peer.publish(
        _meta_subject(store.name, "long-link"),
        json.dumps({**record, "name": "long-link", "options": link}).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    chunked = {**record, "name": "long-nuid", "nuid": "n" * 5000, "size": 1, "chunks": 1}
    await peer.publish(
        _meta_subject(store.name, "long-nuid"),
        json.dumps(chunked).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    for name in ("long-link", "long-nuid", "y" * 6000):
        with pytest.raises(jetstream.JetStreamError) as refused:
            await asyncio.wait_for(store.get_bytes(name), 2.0)
        assert not isinstance(refused.value, jetstream.RequestTimeoutError)
        assert await store.get_bytes("honest.bin") == b"h" * 100, "the connection survived"


@pytest.mark.parametrize("cut", ["#", "?", "/"])
async def test_a_failed_connects_traceback_never_shows_the_password(
    nats_server: jetstream.EmbeddedServer, cut: str
) -> None:
    """A ``#``, ``?`` or ``/`` in a URL's password ends the URL's authority: nats-py's URL
    parser then raised ``Port could not be cast to integer value as 'S3cret'``, chained under
    ConnectionFailedError, so the traceback a Spark task failure or ``log.exception`` prints
    showed the password. Such a URL is now refused before any attempt (a URL cannot carry
    that password), with nothing of it quoted or chained."""
    url = f"nats://alice:S3cret{cut}x@127.0.0.1:{nats_server.port}"
    with pytest.raises(jetstream.ClientValidationError) as failed:
        await jetstream.connect(url, connect_timeout=1)
    shown = "".join(traceback.format_exception(failed.value))
    chain: list[BaseException] = []
    error: BaseException | None = failed.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert "S3cret" not in shown and not any("S3cret" in repr(e) for e in chain)


@pytest.mark.parametrize("path", ["out\0.bin", "", ".", "..", "/", 123, b"out.bin"])
async def test_get_file_refuses_a_path_that_names_no_file(
    store: ObjectStore, tmp_path: Path, path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raw ValueError/TypeError from os and pathlib reached the caller (an embedded NUL, an
    empty name, a number); now a typed error before anything is read or created."""
    await store.put("o.bin", b"data")
    monkeypatch.chdir(tmp_path)  # relative paths land in the test's directory
    with pytest.raises(jetstream.ClientValidationError):
        await store.get_file("o.bin", path)  # type: ignore[arg-type]
    assert await asyncio.to_thread(os.listdir, tmp_path) == []
