"""The model tests' own server: histories kill, pause and restart it, so it is not shared
with other tests. It keeps its store across restarts (kill -9 must lose nothing acked)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jetstream.EmbeddedServer]:
    store: Path = tmp_path_factory.mktemp("model-store")
    server = jetstream.EmbeddedServer(store_dir=store)
    server.start()
    try:
        yield server
    finally:
        server.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long histories run only when asked for (``-m model_long``): deselected otherwise,
    whatever other ``-m`` expression is given."""
    if "model_long" in (config.getoption("markexpr") or ""):
        return
    long = [item for item in items if item.get_closest_marker("model_long")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not item.get_closest_marker("model_long")]
