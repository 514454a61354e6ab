"""The blocking client cannot drift from the async API: every public async function and
method has a blocking twin of the same name whose parameters (names, kinds, defaults,
annotations) are the async one's, and whose result is the async one's with its async
handles replaced by their twins. What is deliberately left out is listed here, with why."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync
import objstore
import objstore.sync
import pcgroups
import pcgroups.sync

CLASSES: list[tuple[type, type]] = [
    (jetstream.JetStream, jetstream.sync.JetStream),
    (jetstream.Consumer, jetstream.sync.Consumer),
    (jetstream.MessageStream, jetstream.sync.MessageStream),
    (jetstream.PullMessage, jetstream.sync.PullMessage),
    (kvstore.Bucket, kvstore.sync.Bucket),
    (kvstore.TypedBucket, kvstore.sync.TypedBucket),
    (kvstore.KeyWatcher, kvstore.sync.KeyWatcher),
    (kvstore.TypedWatcher, kvstore.sync.TypedWatcher),
    (kvstore.KeyBatch, kvstore.sync.KeyBatch),
    (kvstore.Lease, kvstore.sync.Lease),
    (kvstore.Election, kvstore.sync.Election),
    (objstore.ObjectStore, objstore.sync.ObjectStore),
    (objstore.ObjectReader, objstore.sync.ObjectReader),
    (pcgroups.GroupMember, pcgroups.sync.GroupMember),
    (pcgroups.BucketGroupWatch, pcgroups.sync.BucketGroupWatch),
    (pcgroups.GroupMessage, pcgroups.sync.GroupMessage),
    (pcgroups.KeyChange, pcgroups.sync.KeyChange),
]

MODULES: list[tuple[Any, Any]] = [
    (jetstream, jetstream.sync),
    (kvstore, kvstore.sync),
    (objstore, objstore.sync),
    (pcgroups, pcgroups.sync),
]

LEFT_OUT: dict[str, str] = {
    # The context's plumbing for the packages built on it, not for applications.
    "JetStream.api": "subject names for the layers above; js.aio.api has them",
    "JetStream.awaiting_reply": "a context manager for the layers' own requests",
    "JetStream.check_loop": "the blocking client always runs on its own loop",
    "JetStream.connection_events": "listeners of the layers above, on the loop thread",
    "JetStream.ensure_open": "plumbing of the layers above",
    "JetStream.nc": "nats-py's client lives on the loop thread; js.aio.nc for async code",
    "JetStream.note_error": "connect() wires it; nothing for applications",
}

LEFT_OUT_PARAMETERS: dict[str, set[str]] = {
    # A callback would run on the loop thread, where a blocking call deadlocks: iterate.
    "Consumer.consume": {"callback"},
    "consume_static": {"handler"},
    "consume_elastic": {"handler"},
    "watch_group": {"handler"},
}

RESULT_TWINS = {
    "AsyncIterator": "Iterator",
    "AsyncListing": "Iterator",
    "StartingStream": "MessageStream",
    "Self": "",
    "AbstractAsyncContextManager": "AbstractContextManager",
}


def _public_callables(cls: type) -> dict[str, Any]:
    found = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if callable(member) or isinstance(member, property):
            found[name] = member
    return found


def _parameters(function: Callable[..., Any], left_out: set[str]) -> list[tuple[Any, ...]]:
    signature = inspect.signature(function)
    return [
        (p.name, p.kind, p.default, _text(p.annotation))
        for p in signature.parameters.values()
        if p.name not in left_out
    ]


def _text(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return re.sub(r"\s+", "", str(text))


def _result(function: Callable[..., Any]) -> str:
    text = _text(inspect.signature(function).return_annotation)
    for async_name, twin in RESULT_TWINS.items():
        text = re.sub(rf"\b{async_name}\b", twin, text)
    return text


@pytest.mark.parametrize(("aio", "blocking"), CLASSES, ids=lambda c: c.__qualname__)
def test_every_public_method_has_a_blocking_twin_with_the_same_parameters(
    aio: type, blocking: type
) -> None:
    twins = _public_callables(blocking)
    for name, member in _public_callables(aio).items():
        where = f"{aio.__name__}.{name}"
        if where in LEFT_OUT:
            continue
        assert name in twins, f"{where} has no blocking twin"
        if isinstance(member, property):
            assert isinstance(twins[name], property), f"{where}: a property in async"
            continue
        left_out = LEFT_OUT_PARAMETERS.get(where, set())
        assert _parameters(getattr(blocking, name), set()) == _parameters(
            getattr(aio, name), left_out
        ), where
        assert inspect.getdoc(getattr(blocking, name)), f"{where}: the twin has no docstring"


@pytest.mark.parametrize(("aio", "blocking"), CLASSES, ids=lambda c: c.__qualname__)
def test_every_blocking_method_returns_what_its_async_twin_returns(
    aio: type, blocking: type
) -> None:
    twins = _public_callables(blocking)
    for name, member in _public_callables(aio).items():
        if f"{aio.__name__}.{name}" in LEFT_OUT or isinstance(member, property):
            continue
        assert _result(getattr(blocking, name)) == _result(getattr(aio, name)), name
    del twins


@pytest.mark.parametrize(("aio", "blocking"), MODULES, ids=lambda m: m.__name__)
def test_every_public_async_function_has_a_blocking_twin(aio: Any, blocking: Any) -> None:
    for name in aio.__all__:
        function = getattr(aio, name)
        twinned = name in getattr(blocking, "__all__", ())  # e.g. consume_static: a handle
        if not inspect.isfunction(function) or not (_is_async(function) or twinned):
            continue
        twin = getattr(blocking, name, None)
        assert twin is not None, f"{aio.__name__}.{name} has no blocking twin"
        left_out = LEFT_OUT_PARAMETERS.get(name, set())
        assert _parameters(twin, set()) == _parameters(function, left_out), name
        assert _result(twin) == _result(function), name
        assert inspect.getdoc(twin), name


def test_the_left_out_names_still_exist_in_the_async_api() -> None:
    """An entry of the lists above that names nothing any more is removed, not kept."""
    methods = {f"{aio.__name__}.{name}" for aio, _ in CLASSES for name in _public_callables(aio)}
    functions = {name for aio, _ in MODULES for name in aio.__all__}
    assert set(LEFT_OUT) | set(LEFT_OUT_PARAMETERS) <= methods | functions


def _is_async(function: Callable[..., Any]) -> bool:
    returns = _text(inspect.signature(function).return_annotation)
    return (
        inspect.iscoroutinefunction(function)
        or inspect.isasyncgenfunction(function)
        or returns.startswith(("AsyncIterator", "AsyncListing"))
    )
