"""natskv with ``keyFile``: a DataFrame written into an encrypted bucket is stored as
ciphertext and reads back (batch and stream) as plaintext; a bad key file fails at planning.
``upload_objects(key_file=)`` does the same for objects."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore
import objstore
import objstore.spark

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402

from jetstream._consume.scan import scan_stream  # noqa: E402
from jetstream._options import run_sync  # noqa: E402

pytestmark = pytest.mark.spark

KEY = bytes(range(32))


def _key_file(path: Path) -> str:
    document = {"primary": "k1", "keys": {"k1": base64.b64encode(KEY).decode()}}
    path.write_text(json.dumps(document))
    return str(path)


async def _bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name, history=2)


async def _stored(url: str, name: str) -> tuple[list[jetstream.StoredMessage], dict[str, bytes]]:
    async with await jetstream.connect(url) as js:
        raw = [m async for m in scan_stream(js, f"KV_{name}", [f"$KV.{name}.>"])]
        ring = jetstream.Keyring({"k1": KEY}, primary="k1")
        bucket = await kvstore.open_bucket(js, name, encryption=ring)
        snapshot = await bucket.get_many(["a", "b"])
        return raw, {key: entry.value for key, entry in snapshot.items()}


def test_write_and_read_an_encrypted_bucket(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("se")
    key_file = _key_file(tmp_path / "keys.json")
    run_sync(lambda: _bucket(nats_server.url, name))
    rows = [("a", b"secret-a"), ("b", b"secret-b")]
    df = spark.createDataFrame(rows, "key string, value binary")
    options: dict[str, Any] = {"servers": nats_server.url, "bucket": name, "keyFile": key_file}
    df.write.format("natskv").mode("append").options(**options).save()

    raw, values = run_sync(lambda: _stored(nats_server.url, name))
    assert values == {"a": b"secret-a", "b": b"secret-b"}
    assert all(b"secret" not in m.data and m.headers["Jetstore-Enc"] == "v1;k1" for m in raw)

    read = spark.read.format("natskv").options(**options).load()
    assert sorted((r.key, bytes(r.value)) for r in read.collect()) == rows
    plain = spark.read.format("natskv").option("servers", nats_server.url).load(name)
    assert all(b"secret" not in bytes(r.value) for r in plain.collect())  # no key: ciphertext

    (tmp_path / "bad.json").write_text("nope")
    bad = {**options, "keyFile": str(tmp_path / "bad.json")}
    with pytest.raises(Exception, match="is not JSON"):  # at planning, before any task
        spark.read.format("natskv").options(**bad).load().collect()
    with pytest.raises(Exception, match="allowPlaintext"):
        spark.read.format("natskv").options(
            servers=nats_server.url, bucket=name, allowPlaintext="true"
        ).load().collect()


async def _objects(url: str, name: str, create: bool) -> tuple[list[bytes], dict[str, bytes]]:
    async with await jetstream.connect(url) as js:
        if create:
            await objstore.create_store(js, name)
            return [], {}
        raw = [
            m.data
            async for m in scan_stream(
                js, f"OBJ_{name}", [f"$O.{name}.C.>"], last_per_subject=False
            )
        ]
        ring = jetstream.Keyring({"k1": KEY}, primary="k1")
        store = await objstore.open_store(js, name, encryption=ring)
        return raw, {o: await store.get_bytes(o) for o in ("a", "b")}


def test_upload_objects_with_a_key_file(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("soe")
    key_file = _key_file(tmp_path / "keys.json")
    run_sync(lambda: _objects(nats_server.url, name, create=True))
    contents = {"a": b"secret-a" * 5000, "b": b"secret-b"}
    df = spark.createDataFrame(list(contents.items()), "name string, data binary").repartition(2)
    (tmp_path / "bad.json").write_text("nope")
    with pytest.raises(jetstream.InvalidKeyringError):  # before any task runs
        objstore.spark.upload_objects(
            df, name, servers=nats_server.url, data_col="data", key_file=str(tmp_path / "bad.json")
        )
    results = objstore.spark.upload_objects(
        df, name, servers=nats_server.url, data_col="data", key_file=key_file, chunk_size=4096
    ).collect()
    assert all(r.error is None for r in results), results
    raw, read = run_sync(lambda: _objects(nats_server.url, name, create=False))
    assert read == contents
    assert raw and all(b"secret" not in chunk for chunk in raw)
