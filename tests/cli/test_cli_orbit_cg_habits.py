"""orbit's ``cg`` tool spellings under ``jetstore cg``: ``create balanced`` / ``create mapped``,
``list``, ``rm``, ``join``, ``create-mapping`` / ``delete-mapping``. Run in this process
(tests/cli/cli_helpers.jetstore_here), so the test itself is not a coroutine: the library
reads back what was written in loops of their own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

import jetstream
import pcgroups
from tests.pcgroups.group_streams import add_group_stream, remove_group_stream

from .cli_helpers import jetstore_here

pytestmark = pytest.mark.integration

T = TypeVar("T")


def _read(url: str, read: Callable[[jetstream.JetStream], Awaitable[T]]) -> T:
    async def connected() -> T:
        async with await jetstream.connect(url) as js:
            return await read(js)

    return asyncio.run(connected())


@pytest.fixture
def partitioned(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> Iterator[str]:
    """A stream stored as ``<p>.<s>.<key>`` (4 partitions), for static groups."""
    name = unique_name("cgs")
    _read(nats_server.url, lambda js: add_group_stream(js, name, partitions=4))
    yield name
    _read(nats_server.url, lambda js: remove_group_stream(js, name))


@pytest.fixture
def orders(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> Iterator[str]:
    """A plain stream ``<s>.<customer>`` for elastic groups."""
    name = unique_name("cge")
    _read(nats_server.url, lambda js: add_group_stream(js, name))
    yield name
    _read(nats_server.url, lambda js: remove_group_stream(js, name))


def test_static_groups_take_orbits_create_shapes_and_verb_names(
    nats_server: jetstream.EmbeddedServer, partitioned: str
) -> None:
    url, stream = ("-s", nats_server.url), partitioned
    balanced = jetstore_here(
        "cg", "static", "create", "balanced", stream, "b", "4", "m1", "m2", *url
    )
    assert balanced.code == 0, balanced.err
    assert _read(nats_server.url, lambda js: pcgroups.static_config(js, stream, "b")) == (
        pcgroups.StaticConfig(max_members=4, members=("m1", "m2"))
    )
    mapped = jetstore_here(
        "cg", "static", "create", "mapped", stream, "m", "2", "x:1", "y:0", "--json", *url
    )
    assert mapped.code == 0, mapped.err
    assert json.loads(mapped.out)["partitions"] == {"x": [1], "y": [0]}
    assert jetstore_here("cg", "static", "list", stream, *url).text.split() == ["b", "m"]
    removed = jetstore_here("cg", "static", "rm", stream, "b", "-f", *url)
    assert removed.code == 0, removed.err
    joined = jetstore_here("cg", "static", "join", stream, "b", "m1", "--count", "1", *url)
    assert joined.code == 1 and "GroupNotFoundError" in joined.err


def test_elastic_groups_take_orbits_mapping_verbs(
    nats_server: jetstream.EmbeddedServer, orders: str
) -> None:
    url, stream = ("-s", nats_server.url), orders
    created = jetstore_here("cg", "elastic", "create", stream, "g", "2", *url)
    assert created.code == 0, created.err
    mapped = jetstore_here("cg", "elastic", "cm", stream, "g", "a:0", "b:1", "--json", *url)
    assert mapped.code == 0, mapped.err
    assert json.loads(mapped.out)["partitions"] == {"a": [0], "b": [1]}
    unmapped = jetstore_here("cg", "elastic", "delete-mapping", stream, "g", "--json", *url)
    assert unmapped.code == 0, unmapped.err
    assert json.loads(unmapped.out)["member_mappings"] == []
