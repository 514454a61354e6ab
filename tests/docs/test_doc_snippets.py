"""Every ```python block of docs/*.md runs as written. A page's fragments say on their first
line which program they run in ("Running the snippets" of docs/README.md); each page's
fragments run in it, in order, as one program. A block that needs a world of its own says on
its first line which test runs it. No block is left out."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

import jetstream
import kvstore
import objstore
from tests.readme import DOCS, ROOT, Block, programs, python_blocks, run_fragment, run_whole
from tests.spark.spark_session import spark  # noqa: F401  (the shared session)

BLOCKS = [b for document in DOCS for b in python_blocks(document)]
RUNS = programs(DOCS)


def test_every_block_of_the_docs_is_run_and_says_by_what() -> None:
    assembled = {b for whole, fragments in RUNS for b in (whole, *fragments)}
    for block in BLOCKS:
        if block.run_by is not None:
            test = (ROOT / block.run_by).read_text()
            assert block.document.name in test, f"{block.where}: {block.run_by} does not run it"
        else:
            assert block in assembled, (
                f"{block.where}: neither a program nor marked "
                "'# inside main() of \"Running the snippets\" in docs/README.md'"
            )
    pages = {b.document.name for b in BLOCKS}
    assert {"KV.md", "OBJECTS.md", "GROUPS.md", "CONSUMERS.md", "SPARK.md"} <= pages


def _runs() -> list[object]:
    return [
        pytest.param(whole, fragments, id=fragments[0].document.name if fragments else whole.where)
        for whole, fragments in RUNS
    ]


@pytest.mark.parametrize(("whole", "fragments"), _runs())
def test_each_pages_snippets_run_as_one_program(
    whole: Block, fragments: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_whole(whole, fragments)


@pytest.mark.spark
@pytest.mark.timeout(400)  # seven Spark jobs, and the session's start if it is the first
def test_the_spark_page_runs(
    spark: object,  # noqa: F811
    nats_server: jetstream.EmbeddedServer,
) -> None:
    (block,) = [b for b in BLOCKS if b.document.name == "SPARK.md"]
    namespace: dict[str, object] = {"spark": spark, "url": nats_server.url}
    try:
        asyncio.run(run_fragment(block, namespace))
        assert namespace["users"].count() == 2  # type: ignore[attr-defined]
        (row,) = namespace["results"].collect()  # type: ignore[attr-defined]
        assert row["error"] is None and row["size"] == len(b"day,sales\n1,42\n")
        assert [r["name"] for r in namespace["objects"].collect()] == ["q3.csv"]  # type: ignore[attr-defined]
        snapshots = spark.read.format("natsobj").option("servers", nats_server.url)  # type: ignore[attr-defined]
        listed = snapshots.load("snapshots").collect()
        assert sorted((r["name"], r["size"]) for r in listed) == [("user.1", 3), ("user.2", 5)]
        shouted = (
            spark.read.format("natskv")  # type: ignore[attr-defined]
            .option("servers", nats_server.url)
            .option("keys", "user.>")  # not the writer's progress keys
            .load("shouted")
        )
        assert sorted((r.key, r.value) for r in shouted.collect()) == [
            ("user.1", b"ADA"),
            ("user.2", b"GRACE"),
        ]
    finally:

        async def remove() -> None:
            async with await jetstream.connect(nats_server.url) as js:
                for removal in (
                    kvstore.delete_bucket(js, "profiles"),
                    kvstore.delete_bucket(js, "shouted"),
                    objstore.delete_store(js, "reports"),
                ):
                    with contextlib.suppress(jetstream.JetStreamError):
                        await removal

        asyncio.run(remove())


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_sync_pages_spark_task_writes_with_the_blocking_client(
    spark: object,  # noqa: F811
    nats_server: jetstream.EmbeddedServer,
) -> None:
    (block,) = [b for b in BLOCKS if b.document.name == "SYNC.md" and b.run_by is not None]
    namespace: dict[str, object] = {"spark": spark, "url": nats_server.url}

    async def bucket(step: str) -> dict[str, bytes]:
        async with await jetstream.connect(nats_server.url) as js:
            if step == "make":
                await kvstore.create_bucket(js, "profiles")
                return {}
            if step == "read":
                made = await kvstore.open_bucket(js, "profiles")
                return {key: (await made.get(key)).value async for key in made.keys()}
            with contextlib.suppress(jetstream.JetStreamError):
                await kvstore.delete_bucket(js, "profiles")
            return {}

    asyncio.run(bucket("make"))
    try:
        asyncio.run(run_fragment(block, namespace))
        assert asyncio.run(bucket("read")) == {"user.1": b"Ada", "user.2": b"Grace"}
    finally:
        asyncio.run(bucket("remove"))
