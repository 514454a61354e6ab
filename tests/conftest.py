"""Fixture chain: one real nats-server per test session -> a JetStream context per test ->
buckets and object stores with unique names, deleted after the test. No server mocks anywhere.
The one SparkSession of a run (``spark``) lives in tests/spark/spark_session.py."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

import nats
import pytest
from nats.js import JetStreamContext

import jetstream
import jetstream.sync
import kvstore
import objstore
from tests.spark.spark_session import spark

__all__ = ["spark"]

_counter = itertools.count()
T = TypeVar("T")

# A suite started in the background (`cmd &` in a script, nohup) inherits SIGINT ignored, and
# so would every CLI process the tests start: Ctrl-C, which those tests send as a terminal does,
# would never reach them. The suite runs as if started from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
async def peer(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[JetStreamContext]:
    """nats-py's own JetStream context, as another client of the same server."""
    nc = await nats.connect(nats_server.url)
    yield nc.jetstream()
    await nc.close()


@pytest.fixture(scope="session")
def nats_server() -> Iterator[jetstream.EmbeddedServer]:
    """A nats-server with JetStream on a free loopback port and a temp store, for the session."""
    with jetstream.EmbeddedServer() as server:
        yield server


@pytest.fixture
async def js(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[jetstream.JetStream]:
    async with await jetstream.connect(nats_server.url) as context:
        yield context


@pytest.fixture
def sync_js(nats_server: jetstream.EmbeddedServer) -> Iterator[jetstream.sync.JetStream]:
    """A blocking client (``jetstream.sync``) on the shared server, closed after the test."""
    with jetstream.sync.connect(nats_server.url) as js:
        yield js


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names unique per test, readable in server logs: ``<prefix>_<test>_<n>_<pid>``."""

    def make(prefix: str = "b") -> str:
        test = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
        return f"{prefix}_{test}_{next(_counter)}_{os.getpid()}"

    return make


BucketFactory = Callable[..., Awaitable[kvstore.Bucket]]


class _Made(Generic[T]):
    """Makes resources (buckets, stores) with unique names in ``async with``, and deletes
    them all when it ends (one the test deleted itself is skipped)."""

    def __init__(
        self,
        js: jetstream.JetStream,
        name: Callable[[], str],
        create: Callable[..., Awaitable[T]],
        delete: Callable[[jetstream.JetStream, str], Awaitable[None]],
        gone: type[Exception],
    ) -> None:
        self._js, self._name, self._gone = js, name, gone
        self._create, self._delete = create, delete
        self._names: list[str] = []

    async def make(self, **options: Any) -> T:
        name = self._name()
        made = await self._create(self._js, name, **options)
        self._names.append(name)
        return made

    async def __aenter__(self) -> Callable[..., Awaitable[T]]:
        return self.make

    async def __aexit__(self, *exc: object) -> None:
        for name in self._names:
            with contextlib.suppress(self._gone):
                await self._delete(self._js, name)


@pytest.fixture
async def make_bucket(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[BucketFactory]:
    """Create buckets with unique names; all are deleted when the test ends."""
    kind = (kvstore.create_bucket, kvstore.delete_bucket, kvstore.BucketNotFoundError)
    async with _Made(js, lambda: unique_name("kv"), *kind) as make:
        yield make


@pytest.fixture
async def bucket(make_bucket: BucketFactory) -> kvstore.Bucket:
    """A bucket keeping 5 revisions per key, with 1 s expiry markers."""
    from datetime import timedelta

    return await make_bucket(history=5, marker_ttl=timedelta(seconds=1))


StoreFactory = Callable[..., Awaitable[objstore.ObjectStore]]


@pytest.fixture
async def make_store(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[StoreFactory]:
    """Create object stores with unique names; all are deleted when the test ends (one the
    test deleted itself is skipped)."""
    kind = (objstore.create_store, objstore.delete_store, objstore.StoreNotFoundError)
    async with _Made(js, lambda: unique_name("os"), *kind) as make:
        yield make


@pytest.fixture
async def store(make_store: StoreFactory) -> objstore.ObjectStore:
    """An object store with the default configuration."""
    return await make_store()
