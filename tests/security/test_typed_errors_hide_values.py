"""A typed view's errors name the key, the revision, the type and where in the value it failed,
never the value: msgspec quotes the offending value ("Invalid enum value 'hunter2'"), a type's
own check may too, and over an encrypted bucket that is the decrypted secret. Neither the
message, the repr, the traceback nor a chained exception may carry it."""

from __future__ import annotations

import asyncio
import enum
import traceback
from typing import Literal

import msgspec
import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory

RING = jetstream.Keyring({"k1": bytes(range(32))}, primary="k1")
SECRET = "hunter2"


class Color(enum.Enum):
    RED = "red"


class Circle(msgspec.Struct, tag=True):
    radius: int


class Square(msgspec.Struct, tag=True):
    side: int


class Profile(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""
    age: int = 0
    color: Color = Color.RED
    level: Literal["low", "high"] = "low"
    shape: Circle | Square | None = None
    scores: dict[str, int] = {}

    def __post_init__(self) -> None:
        if self.name.startswith("hunter"):
            raise ValueError(f"name {self.name!r} is reserved")  # a check quoting the value
        if self.name.startswith("y"):  # ... in the words msgspec uses for its own errors
            raise TypeError(f"Expected `{self.name}`")
        assert not self.name.startswith("x"), f"{self.name!r} starts with x"


# Stored bytes that are no Profile, each failing differently (all hold the secret), and what
# the error still says about it.
UNREADABLE = {
    "wrong type": (b'{"age": "hunter2"}', "Expected `int`, got `str` at `$.age`"),
    "enum": (b'{"color": "hunter2"}', "a value the type does not allow at `$.color`"),
    "literal": (b'{"level": "hunter2"}', "a value the type does not allow at `$.level`"),
    "union tag": (b'{"shape": {"type": "hunter2"}}', "at `$.shape.type`"),
    "unknown field": (b'{"hunter2": 1}', "an unknown field"),
    "type's check": (b'{"name": "hunter2"}', "Profile's own check raised ValueError"),
    "type's assert": (b'{"name": "xhunter2"}', "Profile's own check raised AssertionError"),
    "type's check in msgspec's words": (b'{"name": "yhunter2"}', "own check raised TypeError"),
    "not UTF-8": (b'{"name": "\xff\xfehunter2"}', "not UTF-8"),
    "malformed": (b'hunter2{"name"', "malformed JSON"),
    "wrong type in a dict": (b'{"scores": {"hunter2": "x"}}', "got `str` at `$.scores[...]`"),
}


def _everything_shown(error: BaseException) -> str:
    """What a log line, a traceback or an error tracker would show of ``error``."""
    return "\n".join((str(error), repr(error), "".join(traceback.format_exception(error))))


def _assert_hides_the_value(error: BaseException) -> None:
    shown = _everything_shown(error)
    assert SECRET not in shown and "\\xff" not in shown and "0xff" not in shown, shown
    assert error.__cause__ is None and error.__context__ is None


@pytest.fixture(params=["plain", "encrypted"])
async def bucket(request: pytest.FixtureRequest, make_bucket: BucketFactory) -> kvstore.Bucket:
    return await make_bucket(history=5, encryption=RING if request.param == "encrypted" else None)


@pytest.mark.parametrize(("stored", "said"), UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_a_value_that_does_not_decode_is_named_by_key_and_revision_only(
    bucket: kvstore.Bucket, stored: bytes, said: str
) -> None:
    revision = await bucket.put("profile", stored)
    profiles = bucket.typed(Profile)
    with pytest.raises(kvstore.ValueDecodeError) as refused:
        await profiles.get("profile")
    error = refused.value
    _assert_hides_the_value(error)
    assert "'profile'" in str(error) and f"revision {revision}" in str(error)
    assert "Profile" in str(error) and said in str(error)
    assert (error.key, error.revision, error.value) == ("profile", revision, stored)
    with pytest.raises(kvstore.ValueDecodeError) as refused:
        await profiles.get_many(["profile"])
    _assert_hides_the_value(refused.value)


async def test_watch_and_history_entries_hide_the_value(bucket: kvstore.Bucket) -> None:
    profiles = bucket.typed(Profile)
    await bucket.put("bad", UNREADABLE["enum"][0])
    await profiles.put("good", Profile(name="alice-private", age=7))
    async with profiles.watch() as watcher:
        entries = [await asyncio.wait_for(anext(watcher), 10) for _ in range(2)]
    entries += [e async for e in profiles.history("bad")]
    for entry in entries:
        assert SECRET not in repr(entry) and "alice-private" not in repr(entry)
        if entry.error is not None:
            _assert_hides_the_value(entry.error)
            with pytest.raises(kvstore.ValueDecodeError) as refused:
                entry.value  # noqa: B018 - reading it raises
            _assert_hides_the_value(refused.value)


@pytest.mark.parametrize(
    "value",
    [
        Profile(color="hunter2"),  # type: ignore[arg-type]
        Profile(level="hunter2"),  # type: ignore[arg-type]
        Profile(scores={"hunter2": "hunter2"}),  # type: ignore[dict-item]
    ],
    ids=["enum", "literal", "dict"],
)
async def test_a_value_that_does_not_encode_is_not_quoted(
    bucket: kvstore.Bucket, value: Profile
) -> None:
    with pytest.raises(kvstore.ValueEncodeError) as refused:
        await bucket.typed(Profile).put("k", value)
    _assert_hides_the_value(refused.value)
    assert "'k'" in str(refused.value) and "Profile" in str(refused.value)
    assert [k async for k in bucket.keys()] == []


async def test_what_msgspec_cannot_encode_is_said_so(bucket: kvstore.Bucket) -> None:
    with pytest.raises(kvstore.ValueEncodeError) as refused:
        await bucket.typed(dict[str, int], format="msgpack").put("k", {"n": 2**70})
    assert "msgspec cannot encode it as MessagePack (OverflowError)" in str(refused.value)
    with pytest.raises(kvstore.ValueEncodeError) as refused:
        await bucket.typed(dict[str, object]).put("k", {"n": object()})
    assert "Encoding objects of type object is unsupported" in str(refused.value)
    _assert_hides_the_value(refused.value)
