"""The long lock trials (``locks_long``), deselected unless asked for."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long lock trials run only when asked for (``-m locks_long``): deselected otherwise,
    whatever other ``-m`` expression is given."""
    if "locks_long" in (config.getoption("markexpr") or ""):
        return
    long = [item for item in items if item.get_closest_marker("locks_long")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not item.get_closest_marker("locks_long")]
