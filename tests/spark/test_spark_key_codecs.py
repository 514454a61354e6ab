"""``keyCodec`` (``base64``, ``path``, chained) for natskv batch writes, streaming writes and
reads: keys any text or paths are stored as the library's codecs store them (readable by a
bucket opened with the same codec), read back decoded and filtered as keys. (A replay
through a path codec: test_stream_writes_store_each_row_once.py.)"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from jetstream._options import run_sync  # noqa: E402
from kvstore.spark import KVDataSource  # noqa: E402
from tests.spark import stream_sink_trials as trials  # noqa: E402

pytestmark = pytest.mark.spark


def _read(url: str, name: str, codec: kvstore.KeyCodec) -> dict[str, list[bytes]]:
    async def read() -> dict[str, list[bytes]]:
        async with await jetstream.connect(url) as js:
            bucket = await kvstore.open_bucket(js, name, key_codec=codec)
            keys = [k async for k in bucket.keys() if not k.startswith("_jetstore")]
            return {k: [e.value for e in await bucket.history(k)] for k in sorted(keys)}

    return run_sync(read)


def test_keys_go_through_the_codec_in_batch_and_streaming_writes_and_reads(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    url = nats_server.url
    text = unique_name("kc")
    trials.bucket(url, text)
    rows = [("Acme Inc.contact", b"a"), ("naïve key.x", b"b"), ("Acme Inc.phone", b"c")]
    df = spark.createDataFrame(rows, ["key", "value"])
    df.write.format("natskv").mode("append").option("servers", url).option(
        "keyCodec", "base64"
    ).save(text)
    assert _read(url, text, kvstore.Base64KeyCodec()) == {k: [v] for k, v in sorted(rows)}
    read = (
        spark.read.format("natskv")
        .option("servers", url)
        .option("keyCodec", "base64")
        .option("keys", "Acme Inc.>")
        .load(text)
    )
    assert sorted((r.key, r.value) for r in read.collect()) == [rows[0], rows[2]]

    paths = unique_name("kc")
    trials.bucket(url, paths)
    folder = tmp_path / "in"
    folder.mkdir()
    for f in range(2):  # one a micro-batch
        lines = [{"key": f"/srv/app{i % 2}/conf", "value": f"{f}.{i}"} for i in range(6)]
        path = folder / f"part-{f}.json"
        path.write_text("\n".join(map(json.dumps, lines)))
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the source takes oldest first
    checkpoint = tmp_path / "checkpoint"
    options = {"servers": url, "bucket": paths, "keyCodec": "path", "batchSize": "4"}
    (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .writeStream.format("natskv")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    expected = {
        f"/srv/app{a}/conf": [f"{f}.{i}".encode() for f in range(2) for i in range(a, 6, 2)]
        for a in range(2)
    }
    assert _read(url, paths, kvstore.PathKeyCodec()) == expected
    changes = (
        spark.readStream.format("natskv")
        .option("servers", url)
        .option("keyCodec", "path")
        .option("keys", "/srv/app1/>")
        .load(paths)
        .writeStream.format("memory")
        .queryName(paths.replace("-", "_"))
        .trigger(availableNow=True)
        .start()
    )
    changes.awaitTermination()
    streamed = spark.sql(f"SELECT key, value FROM {paths.replace('-', '_')}").collect()
    assert [(r.key, r.value) for r in streamed] == [
        ("/srv/app1/conf", v) for v in expected["/srv/app1/conf"]
    ]


@pytest.mark.parametrize(
    ("codec", "keys", "message"),
    [("rot13", ">", "keyCodec"), ("path", "a.b/>", "not allowed")],
)
def test_a_bad_codec_or_a_filter_that_is_no_key_of_it_is_refused_at_planning(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    codec: str,
    keys: str,
    message: str,
) -> None:
    name = unique_name("kc")
    trials.bucket(nats_server.url, name)
    options = {"servers": nats_server.url, "bucket": name, "keyCodec": codec, "keys": keys}
    with pytest.raises(jetstream.ClientValidationError, match=message):
        KVDataSource(options).reader(
            StructType([StructField("key", StringType()), StructField("value", StringType())])
        )
