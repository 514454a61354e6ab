"""Hostile review session 9, Spark: a natskv read schema that worked before the change."""

from __future__ import annotations

from typing import Any

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

import kvstore.spark  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("schema", "expected"),
    [("key string, revision int", ("k", 1)), ("key string, revision double", ("k", 1.0))],
    ids=["revision-int", "revision-double"],
)
def test_a_natskv_read_with_a_widened_or_narrowed_revision_still_reads(
    spark: Any, nats_server: jetstream.EmbeddedServer, schema: str, expected: tuple[Any, ...]
) -> None:
    """``.schema("key string, revision int")`` read every row before the change (Spark
    converts the ints); _READ_TYPES now refuses anything but ``long`` at planning with
    ColumnError, breaking jobs that declared the revision as an int."""
    name = f"review9{schema.split()[-1]}"

    async def setup() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            await bucket.put("k", b"v")

    jetstream.run_sync(setup)
    kvstore.spark.register(spark)
    rows = (
        spark.read.format("natskv")
        .schema(schema)
        .option("servers", nats_server.url)
        .option("bucket", name)
        .load()
        .collect()
    )
    assert [tuple(row) for row in rows] == [expected]
