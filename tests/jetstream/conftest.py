"""Fixtures of the connection tests: a server of a test's own, and a check for leaked sockets."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import jetstream


@pytest.fixture
def own_server() -> Iterator[jetstream.EmbeddedServer]:
    """A server of the test's own, to kill or pause without disturbing the session's."""
    with jetstream.EmbeddedServer() as server:
        yield server


@pytest.fixture
def garbage_collected() -> Iterator[None]:
    """A socket left open shows as a ResourceWarning (an error) in the test that leaked it
    (``pytest.mark.usefixtures("garbage_collected")``)."""
    yield
    gc.collect()
