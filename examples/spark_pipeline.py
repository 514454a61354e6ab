"""A Spark pipeline on NATS: user records land in a KV bucket atomically, generated files are
uploaded as objects from the executors, and the key changes are streamed back.

Runs a local SparkSession and, unless $NATS_URL is set, an embedded nats-server.
Needs the spark extra:  pip install 'jetstore[spark]'

    python examples/spark_pipeline.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path

from pyspark.sql import SparkSession

import jetstream
import kvstore
import kvstore.spark
import objstore
import objstore.spark


def nats_url(stack: ExitStack) -> str:
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        return url
    server = stack.enter_context(jetstream.EmbeddedServer())
    print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
    return server.url


def spark_session() -> SparkSession:
    # No PYSPARK_PYTHON needed: importing kvstore.spark (above) made Spark's Python workers
    # run this interpreter, even when its venv is not on PATH.
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetstore-example")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kvstore.spark.register(spark)  # or rely on the pyspark_natskv auto-registration
    objstore.spark.register(spark)
    return spark


async def prepare(url: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, "users", history=5)
        await objstore.create_store(js, "reports")


def main() -> None:
    with ExitStack() as stack:
        url = nats_url(stack)
        asyncio.run(prepare(url))
        spark = spark_session()
        stack.callback(spark.stop)

        # 1. A small dataset: 1000 users, each stored as two keys, written in atomic batches.
        users = spark.range(1000).selectExpr(
            "cast(id as string) as id",
            "concat('user-', id) as name",
            "concat('city-', id % 7) as city",
        )
        records = users.selectExpr(
            "stack(2, concat('user.', id, '.name'), name, concat('user.', id, '.city'), city)"
            " as (key, value)"
        )
        records.write.format("natskv").mode("append").option("servers", url).save("users")
        print("wrote", records.count(), "keys to bucket 'users'")

        # 2. Files produced by the job, uploaded as objects from the executors.
        folder = Path(tempfile.mkdtemp())
        for city in range(7):
            (folder / f"city-{city}.csv").write_text(f"city,users\ncity-{city},{1000 // 7}\n")
        files = spark.createDataFrame(
            [(p.name, str(p)) for p in sorted(folder.iterdir())], "name string, path string"
        )
        uploaded = objstore.spark.upload_objects(files, "reports", servers=url, path_col="path")
        print("uploaded", uploaded.where("error is null").count(), "reports")

        # 3. Stream the key changes back (everything so far, then stop: availableNow).
        query = (
            spark.readStream.format("natskv").option("servers", url).option("keys", "user.*.city")
            .load("users").writeStream.format("memory").queryName("changes")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        changes = spark.sql("select count(*) as n, max(revision) as last from changes").collect()[0]
        print(f"streamed {changes.n} city changes, up to revision {changes.last}")
        listed = spark.read.format("natsobj").option("servers", url).load("reports")
        print("objects in 'reports':", listed.count())


if __name__ == "__main__":
    main()
