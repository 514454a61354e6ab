"""``stream_subjects``: the subjects a stream holds messages on, from the server's
subject index (paged: the server answers at most 100,000 subjects per request)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import jetstream
import kvstore
from jetstream._api.stream_subjects import stream_subjects

pytestmark = pytest.mark.integration


async def test_subjects_of_several_filters_once_each_sorted(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("ss")
    bucket = await kvstore.create_bucket(js, name, history=3)
    await bucket.put_many({"a.1": b"x", "a.2": b"x", "b.1": b"x", "c.1": b"x"})
    await bucket.put("a.1", b"y")
    await bucket.delete("b.1")  # a tombstone is a message: its subject is listed
    prefix = f"$KV.{name}."
    listed = await stream_subjects(
        js, bucket.stream, [f"{prefix}a.>", f"{prefix}b.*", f"{prefix}a.1", f"{prefix}z.>"]
    )
    assert listed == [f"{prefix}a.1", f"{prefix}a.2", f"{prefix}b.1"]
    with pytest.raises(jetstream.StreamNotFoundError):
        await stream_subjects(js, f"{bucket.stream}_none", [">"])


async def test_more_subjects_than_one_page_are_all_listed(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("ss")
    bucket = await kvstore.create_bucket(js, name, storage="memory")
    keys = 100_300  # the server pages at 100,000
    for start in range(0, keys, 1000):
        await bucket.put_many({f"k{i}": b"" for i in range(start, min(start + 1000, keys))})
    listed = await stream_subjects(js, bucket.stream, [f"$KV.{name}.>"])
    assert len(listed) == keys and len(set(listed)) == keys


@pytest.mark.parametrize("filters", ["$KV.x.>", [""], ["a b"], ["a..b"], [".a"], ["a\r\nPUB x 1"]])
async def test_bad_filters_are_refused_before_any_request(
    js: jetstream.JetStream, filters: object
) -> None:
    # The stream does not exist: a request would raise StreamNotFoundError instead.
    with pytest.raises(jetstream.ClientValidationError):
        await stream_subjects(js, "NO_SUCH_STREAM", filters)  # type: ignore[arg-type]
