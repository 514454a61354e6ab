"""Every ```python block of docs/*.md runs as written: each document's fragments in order in
one namespace against the fixtures' server (tests/readme.py makes what they assume), the Spark
page's block in the test session. A block that needs a world of its own is run by the test
file named in RUN_ELSEWHERE; no block is left out (whole programs have no runner here yet: the
README's test shows how, should a page get one)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import jetstream
import kvstore
import objstore
from tests.readme import DOCS, Block, python_blocks, run_fragment, run_fragments, snippet_world
from tests.spark.spark_session import spark  # noqa: F401  (the shared session)

BLOCKS = {doc.name: python_blocks(doc) for doc in DOCS}

# (document, heading) -> the test file that runs that block, in the world it needs.
RUN_ELSEWHERE = {("CODECS.md", "Key-name formats and older buckets"): "test_key_name_migration.py"}


def _fragments(document: str) -> list[Block]:
    return [
        b
        for b in BLOCKS[document]
        if not b.is_program and not b.needs_spark and (document, b.heading) not in RUN_ELSEWHERE
    ]


def test_every_block_of_the_docs_is_run_by_a_test() -> None:
    run_here = {
        (doc, b.line)
        for doc, blocks in BLOCKS.items()
        for b in blocks
        if b.needs_spark or b in _fragments(doc)
    }
    elsewhere = {
        (doc, b.line) for doc, blocks in BLOCKS.items() for b in blocks
        if (doc, b.heading) in RUN_ELSEWHERE
    }  # fmt: skip
    every = {(doc, b.line) for doc, blocks in BLOCKS.items() for b in blocks}
    assert every == run_here | elsewhere
    assert len(elsewhere) == len(RUN_ELSEWHERE)  # each named block still exists
    tests = Path(__file__).parents[1]
    for test in RUN_ELSEWHERE.values():
        assert list(tests.rglob(test)), test
    assert {"KV.md", "OBJECTS.md", "GROUPS.md", "CONSUMERS.md", "SPARK.md"} <= {
        doc for doc, blocks in BLOCKS.items() if blocks
    }


async def _codecs_world(js: jetstream.JetStream) -> None:
    """docs/CODECS.md opens buckets and a store as made elsewhere."""
    await kvstore.create_bucket(js, "files")
    await kvstore.create_bucket(js, "secrets")
    await objstore.create_store(js, "models")


BEFORE: dict[str, Callable[[jetstream.JetStream], Awaitable[None]]] = {"CODECS.md": _codecs_world}


@pytest.mark.parametrize("document", [d for d in BLOCKS if _fragments(d)])
async def test_the_fragments_of_a_document_run_in_order(
    document: str, js: jetstream.JetStream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with snippet_world(js, tmp_path) as world:
        if document in BEFORE:
            await BEFORE[document](js)
        await run_fragments(_fragments(document), world)


@pytest.mark.spark
@pytest.mark.timeout(300)  # five Spark jobs, and the session's start if it is the first
def test_the_spark_page_runs(
    spark: object,  # noqa: F811
    nats_server: jetstream.EmbeddedServer,
) -> None:
    (block,) = [b for b in BLOCKS["SPARK.md"] if b.needs_spark]
    namespace: dict[str, object] = {"spark": spark, "url": nats_server.url}
    try:
        asyncio.run(run_fragment(block, namespace))
        assert namespace["users"].count() == 2  # type: ignore[attr-defined]
        (row,) = namespace["results"].collect()  # type: ignore[attr-defined]
        assert row["error"] is None and row["size"] == len(b"day,sales\n1,42\n")
        assert [r["name"] for r in namespace["objects"].collect()] == ["q3.csv"]  # type: ignore[attr-defined]
    finally:

        async def remove() -> None:
            async with await jetstream.connect(nats_server.url) as js:
                for removal in (
                    kvstore.delete_bucket(js, "profiles"),
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
    (block,) = [b for b in BLOCKS["SYNC.md"] if b.needs_spark]
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
