"""natskv with ``keyFile``: a DataFrame written into an encrypted bucket is stored as
ciphertext and reads back (batch and stream) as plaintext; a bad key file fails at planning."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402

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
        raw = [m async for m in jetstream.scan_stream(js, f"KV_{name}", [f"$KV.{name}.>"])]
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
    jetstream.run_sync(lambda: _bucket(nats_server.url, name))
    rows = [("a", b"secret-a"), ("b", b"secret-b")]
    df = spark.createDataFrame(rows, "key string, value binary")
    options: dict[str, Any] = {"servers": nats_server.url, "bucket": name, "keyFile": key_file}
    df.write.format("natskv").mode("append").options(**options).save()

    raw, values = jetstream.run_sync(lambda: _stored(nats_server.url, name))
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
